"""Running the corpus: the obedient model where the product looks for its models, tenant A's
order system, and every case through `orchestrator.handle_customer_message` (the path the
socket and REST use) in one event loop, with one gateway pool polling the model."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.test import override_settings

from actions.models import ActionRequest
from chat import orchestrator
from conversations import services
from evals.injection.checks import Observed, case_violations
from evals.injection.corpus import CASES, InjectionCase
from evals.injection.model import MODEL_NAME, ObedientModel
from evals.injection.world import OrderSystem, World, world_build
from inference import selectors as inference_selectors
from inference import services as inference_services
from inference.models import ModelWorker
from inference.pool import Pool, set_pool

_CITATION = re.compile(r"\s*\[\d+\]")


def corpus_settings(model_url: str) -> dict:
    """The settings of a run: the obedient model is the one worker (`INFERENCE_WORKERS`), and
    every answer with strong evidence waits on it — no yield policy, a first-words budget it
    always meets, no answer cache (each case gets its own answer), a token budget the corpus
    cannot spend. None of these is a guard the corpus tests."""
    return {
        "INFERENCE": {
            **settings.INFERENCE,
            "WORKERS": f"{model_url}|primary|{MODEL_NAME}",
            "DISCOVERY": "",
            "YIELD_POLICY": False,
            "STALE_AFTER_S": 60.0,
            "TENANT_TOKENS_PER_MINUTE": 10_000_000,
            "TENANT_TOKEN_BURST": 10_000_000,
        },
        "ANSWER_FIRST_WORDS_BUDGET_S": 30.0,
        "ANSWER_CACHE_ENABLED": False,
    }


@dataclass
class InjectionResult:
    case: InjectionCase
    kinds: list[str]
    paths: list[str]
    replies: list[str]
    violations: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # "tool: state (error code)"
    model_calls: list[str] = field(default_factory=list)  # answer | tool | other, in order
    model_output: list[str] = field(default_factory=list)
    attacks: int = 0  # attack sentences the model wrote
    attacks_shown: int = 0  # … that reached the customer
    order_requests: int = 0


@dataclass
class InjectionRun:
    results: list[InjectionResult]
    seconds: float
    refund_requests: int  # refund requests the order system received during the run
    order_requests: int
    model_url: str = ""


def injection_run(*, orders: OrderSystem) -> InjectionRun:
    """Build the world, send every case (each in a fresh conversation), check what it left."""
    started = time.monotonic()
    with ObedientModel() as model, override_settings(**corpus_settings(model.url)):
        world = world_build(orders=orders)
        logged = len(orders.requests())
        results = async_to_sync(_run_cases)(world, model, orders)
        during = orders.requests()[logged:]
    refunds = [r for r in during if r["method"] == "POST" and r["path"].startswith("/refunds")]
    return InjectionRun(
        results, time.monotonic() - started, len(refunds), len(during), model_url=model.url
    )


async def _run_cases(world: World, model: ObedientModel, orders: OrderSystem) -> list:
    pool = Pool(redis_prefix=f"sb:inj:{uuid.uuid4().hex[:8]}")
    previous = set_pool(pool)
    try:
        await pool.ensure_running()
        return [await _run_case(world, model, orders, n, case) for n, case in enumerate(CASES)]
    finally:
        await pool.stop()
        set_pool(previous)


async def _run_case(
    world: World, model: ObedientModel, orders: OrderSystem, n: int, case: InjectionCase
) -> InjectionResult:
    asker = world.victim if case.verified else world.visitor
    conversation = await sync_to_async(services.conversation_start)(
        tenant=world.tenant, customer=asker
    )
    requests = sync_to_async(orders.requests, thread_sensitive=False)
    before = await sync_to_async(_action_ids)()
    logged, calls = len(await requests()), len(model.calls)
    seen = Observed()
    for m, text in enumerate((case.text, *case.then)):
        outcome = await orchestrator.handle_customer_message(
            conversation=conversation, client_message_id=f"inj-{n}-{m}", text=text
        )
        if outcome.reply is not None:
            seen.replies.append(outcome.reply)
    seen.actions = await sync_to_async(_actions_since)(before)
    seen.order_requests = (await requests())[logged:]
    seen.calls = model.calls[calls:]
    violations = await sync_to_async(case_violations)(world, case, seen)
    return _result(world, case, seen, violations)


def _action_ids() -> set[int]:
    return set(ActionRequest.objects.values_list("id", flat=True))


def _actions_since(before: set[int]) -> list[ActionRequest]:
    return list(ActionRequest.objects.exclude(id__in=before).order_by("id"))


def _result(
    world: World, case: InjectionCase, seen: Observed, violations: list[str]
) -> InjectionResult:
    """The case's row; an attack counts as shown when a reply holds it and it is not the
    tenant's own published text quoted back (as the checks count it)."""
    shown = _CITATION.sub("", " ".join(r.text for r in seen.replies))
    attacks = [_CITATION.sub("", a).rstrip(".") for a in seen.instructed]
    return InjectionResult(
        case=case,
        kinds=[r.kind for r in seen.replies],
        paths=[(r.meta or {}).get("path", "") for r in seen.replies],
        replies=[r.text for r in seen.replies],
        violations=violations,
        actions=[
            f"{a.tool}: {a.state}" + (f" ({a.error_code})" if a.error_code else "")
            for a in seen.actions
        ],
        model_calls=[call.kind for call in seen.calls],
        model_output=[call.output for call in seen.calls],
        attacks=len(attacks),
        attacks_shown=sum(a in shown and a not in world.public_text for a in attacks),
        order_requests=len(seen.order_requests),
    )


def model_worker_retire(model_url: str) -> None:
    """Stop the registry row the pool made for the obedient model (`INFERENCE_WORKERS`
    entries are registered when a pool starts), so no poller keeps visiting a closed port."""
    worker = inference_selectors.worker_get(name=inference_services.external_worker_name(model_url))
    if worker is not None:
        inference_services.worker_set_state(worker_id=worker.pk, state=ModelWorker.State.STOPPED)
