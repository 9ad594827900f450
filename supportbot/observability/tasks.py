"""django-q2 tasks carry the request id, conversation id and trace of whoever enqueued them,
and report their queue wait, run time and outcome as metrics shared by every process.

A task's context rides in the task package itself (`pre_enqueue` adds `sb_context`), never in
its arguments, so task functions keep their signatures. Workers bind it before the task runs
(`pre_execute`); counters go to Redis (one pipeline per task) so `/metrics` of any web
process shows every worker's tasks.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone
from django_q.signals import post_execute_in_worker, pre_enqueue, pre_execute
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry
from redis import Redis, RedisError

from supportbot.observability import context, tracing

logger = logging.getLogger(__name__)

KEY = "sb:metrics:tasks"
_redis: Redis | None = None
_running: dict[int, tuple] = {}


def _store() -> Redis:
    global _redis
    if _redis is None:
        _redis = Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    return _redis


def _task_name(task: dict) -> str:
    func = task.get("func")
    name = func if isinstance(func, str) else getattr(func, "__qualname__", str(func))
    return name.rsplit(".", 1)[-1][:80]


@receiver(pre_enqueue)
def _on_enqueue(sender, task: dict, **kwargs) -> None:
    carrier = tracing.inject({})
    task["sb_context"] = {
        "request_id": context.request_id(),
        "conversation_id": context.conversation_id(),
        "trace": carrier,
    }


@receiver(pre_execute)
def _on_execute(sender, func, task: dict, **kwargs) -> None:
    ctx = task.get("sb_context") or {}
    rid = context.clean_request_id(ctx.get("request_id")) or context.new_request_id()
    cid = ctx.get("conversation_id") if isinstance(ctx.get("conversation_id"), int) else None
    context.request_id_var.set(rid)
    context.conversation_id_var.set(cid)
    name = _task_name(task)
    span_cm = tracing.continued(ctx.get("trace"), f"task {name}", **{"task.id": task.get("id")})
    span_cm.__enter__()
    _running[id(task)] = (span_cm, time.monotonic())
    started = task.get("started")
    wait = (timezone.now() - started).total_seconds() if started else 0.0
    logger.info("task %s started", name, extra={"task": name, "queue_wait_s": round(wait, 3)})
    try:
        pipe = _store().pipeline(transaction=False)
        pipe.hincrbyfloat(KEY, f"wait_sum|{name}", max(wait, 0.0))
        pipe.hincrby(KEY, f"wait_count|{name}", 1)
        pipe.execute()
    except RedisError:
        logger.warning("task metrics store unavailable")


@receiver(post_execute_in_worker)
def _on_done(sender, func, task: dict, **kwargs) -> None:
    span_cm, began = _running.pop(id(task), (None, time.monotonic()))
    name = _task_name(task)
    outcome = "success" if task.get("success") else "failure"
    seconds = time.monotonic() - began
    logger.info("task %s %s", name, outcome, extra={"task": name, "seconds": round(seconds, 3)})
    if span_cm is not None:
        span_cm.__exit__(None, None, None)
    try:
        pipe = _store().pipeline(transaction=False)
        pipe.hincrby(KEY, f"total|{name}|{outcome}", 1)
        pipe.hincrbyfloat(KEY, f"seconds_sum|{name}", seconds)
        pipe.hincrby(KEY, f"seconds_count|{name}", 1)
        pipe.execute()
    except RedisError:
        logger.warning("task metrics store unavailable")
    context.request_id_var.set(None)
    context.conversation_id_var.set(None)


class TaskCollector(Collector):
    """`supportbot_tasks_total{task,outcome}`, `supportbot_task_duration_seconds{task}` and
    `supportbot_task_queue_wait_seconds{task}` (summaries: _sum, _count) from every worker,
    and `supportbot_task_queue_depth` (tasks waiting in this cluster's queue)."""

    def collect(self):
        try:
            raw = {k.decode(): float(v) for k, v in _store().hgetall(KEY).items()}
            from django_q.brokers import get_broker

            queued = get_broker().queue_size() or 0
        except (RedisError, OSError):
            return
        total = CounterMetricFamily(
            "supportbot_tasks", "Background tasks run, by outcome", labels=["task", "outcome"]
        )
        for field, value in raw.items():
            kind, _, rest = field.partition("|")
            if kind == "total":
                task, _, outcome = rest.partition("|")
                total.add_metric([task, outcome], value)
        yield total
        for metric, stem, help_text in (
            ("supportbot_task_duration_seconds", "seconds", "Time tasks ran"),
            ("supportbot_task_queue_wait_seconds", "wait", "Time tasks waited in the queue"),
        ):
            family = SummaryMetricFamily(metric, help_text, labels=["task"])
            for field, value in raw.items():
                kind, _, task = field.partition("|")
                if kind == f"{stem}_count":
                    family.add_metric([task], value, raw.get(f"{stem}_sum|{task}", 0.0))
            yield family
        depth = GaugeMetricFamily("supportbot_task_queue_depth", "Tasks waiting in the queue")
        depth.add_metric([], queued)
        yield depth


def task_registry() -> CollectorRegistry:
    """A registry holding only the task metrics (rendered beside the others at /metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TaskCollector())
    return registry
