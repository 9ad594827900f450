"""Gateway-side Prometheus metrics (exported on `/metrics` with the pool's worker gauges)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from inference.models import ModelWorker

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10)

REQUESTS = Counter(
    "supportbot_inference_requests",
    "Gateway requests by requested role and outcome.",
    ["role", "outcome"],
)
RETRIES = Counter(
    "supportbot_inference_retries",
    "Attempts retried on another worker before the first byte.",
    ["worker"],
)
ADMISSION_REJECTIONS = Counter(
    "supportbot_inference_admission_rejections",
    "Requests refused before reaching a worker.",
    ["reason"],
)
TOKENS = Counter("supportbot_inference_tokens", "Tokens through the gateway.", ["kind"])
TTFT = Histogram(
    "supportbot_inference_ttft_seconds",
    "Time to first token measured by the gateway (admission + routing + engine).",
    ["worker"],
    buckets=_LATENCY_BUCKETS,
)
ITL = Histogram(
    "supportbot_inference_itl_seconds",
    "Inter-token latency measured by the gateway.",
    ["worker"],
    buckets=_LATENCY_BUCKETS,
)


def worker_registry_collector(workers: list[ModelWorker]) -> CollectorRegistry:
    """A registry holding one gauge family per pool figure, labelled by worker name."""

    class _Collector:
        def collect(self):
            up = GaugeMetricFamily(
                "supportbot_inference_worker_up",
                "1 if ready and healthy.",
                labels=["worker", "role"],
            )
            running = GaugeMetricFamily(
                "supportbot_inference_worker_running", "Engine running requests.", labels=["worker"]
            )
            waiting = GaugeMetricFamily(
                "supportbot_inference_worker_waiting", "Engine queue depth.", labels=["worker"]
            )
            kv = GaugeMetricFamily(
                "supportbot_inference_worker_kv_cache_usage", "KV-cache use 0-1.", labels=["worker"]
            )
            breaker = GaugeMetricFamily(
                "supportbot_inference_worker_breaker_open",
                "1 if the circuit breaker is open or half-open.",
                labels=["worker"],
            )
            for w in workers:
                m = w.last_metrics or {}
                up.add_metric(
                    [w.name, w.role], float(w.state == ModelWorker.State.READY and w.healthy)
                )
                running.add_metric([w.name], float(m.get("running", 0.0)))
                waiting.add_metric([w.name], float(m.get("waiting", 0.0)))
                kv.add_metric([w.name], float(m.get("kv_cache_usage", 0.0)))
                breaker.add_metric([w.name], float(w.breaker_state != "closed"))
            yield from (up, running, waiting, kv, breaker)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return registry
