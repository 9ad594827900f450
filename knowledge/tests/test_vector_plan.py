"""The vector plan (exact scan or HNSW) is kept per tenant for a while, not counted per turn."""

import sys
import threading
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.selectors import candidates, vector_plan_choose, vector_plan_forget
from knowledge.services import knowledge_revision_bump

from .factories import ChunkFactory, DocumentFactory


def _counts(ctx) -> int:
    return sum(
        "FROM knowledge_chunk" in q["sql"] and "LIMIT" in q["sql"] for q in ctx.captured_queries
    )


@pytest.fixture(autouse=True)
def _fresh_plans(settings):
    settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS = 2
    settings.KNOWLEDGE_VECTOR_PLAN_TTL_S = 30.0
    with candidates._plans_lock:
        candidates._plans.clear()


def _chunks(tenant, n: int) -> None:
    document = DocumentFactory(tenant=tenant)
    for _ in range(n):
        ChunkFactory(document=document)


def test_a_tenants_plan_is_counted_once_within_its_lifetime(tenant):
    _chunks(tenant, 3)
    with CaptureQueriesContext(connection) as ctx:
        plans = [vector_plan_choose(tenant=tenant) for _ in range(5)]
    assert plans == ["hnsw"] * 5
    assert _counts(ctx) == 1


def test_a_kept_plan_is_never_another_tenants(tenant, other_tenant):
    _chunks(tenant, 3)
    assert vector_plan_choose(tenant=tenant) == "hnsw"
    assert vector_plan_choose(tenant=other_tenant) == "exact"  # no chunks: its own count
    assert vector_plan_choose(tenant=tenant) == "hnsw"


def test_an_index_run_in_this_process_forgets_the_tenants_plan(tenant, other_tenant):
    _chunks(tenant, 1)
    _chunks(other_tenant, 3)
    assert vector_plan_choose(tenant=tenant) == "exact"
    assert vector_plan_choose(tenant=other_tenant) == "hnsw"
    _chunks(tenant, 2)
    assert vector_plan_choose(tenant=tenant) == "exact"  # kept: nothing said it changed
    knowledge_revision_bump(tenant=tenant)
    with CaptureQueriesContext(connection) as ctx:
        assert vector_plan_choose(tenant=tenant) == "hnsw"
        assert vector_plan_choose(tenant=other_tenant) == "hnsw"
    assert _counts(ctx) == 1  # the other tenant's plan was kept


def test_a_plan_is_counted_again_once_its_lifetime_is_over(tenant, settings):
    settings.KNOWLEDGE_VECTOR_PLAN_TTL_S = 0.0
    _chunks(tenant, 1)
    assert vector_plan_choose(tenant=tenant) == "exact"
    _chunks(tenant, 2)
    assert vector_plan_choose(tenant=tenant) == "hnsw"


def test_a_changed_threshold_is_never_answered_from_the_old_one(tenant, settings):
    _chunks(tenant, 3)
    assert vector_plan_choose(tenant=tenant) == "hnsw"
    settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS = 10
    assert vector_plan_choose(tenant=tenant) == "exact"


def test_plans_kept_and_forgotten_from_many_threads_at_once(monkeypatch, settings):
    """The CPU pool's threads choose plans while index runs forget them."""
    settings.KNOWLEDGE_VECTOR_PLAN_TTL_S = 0.0  # every choice counts and writes
    monkeypatch.setattr(candidates, "tenant_live_chunk_count", lambda *, tenant, cap: 5)
    tenants = [SimpleNamespace(pk=n) for n in range(3000)]
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        barrier.wait()
        try:
            for round_ in range(1500):
                tenant = tenants[(n * 31 + round_) % len(tenants)]
                if n % 2:
                    vector_plan_forget(tenant_id=tenant.pk)
                else:
                    assert vector_plan_choose(tenant=tenant) == "hnsw"
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(previous)
    assert errors == []
