import uuid

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from inference import yields
from inference.tests.factories import InferenceUsageFactory, ModelWorkerFactory
from supportbot.tests.factories import TenantFactory, UserFactory


@pytest.fixture
def staff(db):
    return UserFactory(username="operator", is_staff=True)


@pytest.fixture
def pool_rows(db):
    up = ModelWorkerFactory(
        name="cpu-primary-1",
        healthy=True,
        last_health_at=timezone.now(),
        last_metrics_at=timezone.now(),
        last_metrics={
            "running": 2.0,
            "waiting": 1.0,
            "kv_cache_usage": 0.25,
            "prefix_cache_hit_rate": 0.5,
            "tokens_per_s": 42.0,
            "engine_window": {"ttft_p50_ms": 300.0, "ttft_p95_ms": 480.0},
        },
    )
    down = ModelWorkerFactory(
        name="cpu-primary-2", healthy=False, last_health_at=timezone.now(), last_error="refused"
    )
    tenant = TenantFactory(slug="acme-ops")
    for ttft in (100.0, 200.0, 300.0):
        InferenceUsageFactory(tenant=tenant, worker=up, ttft_ms=ttft, itl_ms=[10.0, 30.0])
    return up, down


def test_ops_page_is_for_staff_only(client, db):
    r = client.get("/console/ops/")
    assert r.status_code == 302
    assert r["Location"].startswith("/console/login/")
    client.force_login(UserFactory(username="agent-x", is_staff=False))
    assert client.get("/console/ops/").status_code == 403
    assert client.get("/console/ops/data.json").status_code == 403


def test_ops_page_renders_workers_and_tenants(client, staff, pool_rows):
    client.force_login(staff)
    r = client.get("/console/ops/")
    assert r.status_code == 200, r.content
    html = r.content.decode()
    assert "cpu-primary-1" in html
    assert "cpu-primary-2" in html
    assert "acme-ops" in html
    assert "inference/ops.js" in html


def test_ops_data_reports_state_breaker_queue_kv_and_latencies(client, staff, pool_rows):
    client.force_login(staff)
    r = client.get("/console/ops/data.json")
    assert r.status_code == 200, r.content
    data = r.json()
    workers = {w["name"]: w for w in data["workers"]}
    up, down = workers["cpu-primary-1"], workers["cpu-primary-2"]
    assert up["status"] == "up"
    assert down["status"] == "down"
    assert down["last_error"] == "refused"
    assert (up["waiting"], up["running"], up["kv_cache_usage"]) == (1.0, 2.0, 0.25)
    assert up["prefix_cache_hit_rate"] == 0.5
    assert up["tokens_per_s"] == 42.0
    assert up["breaker"] == "closed"
    assert up["engine"]["ttft_p95_ms"] == 480.0
    assert up["router"]["ttft_p50_ms"] == pytest.approx(200.0)
    assert up["router"]["itl_p50_ms"] == pytest.approx(20.0)
    assert up["router"]["requests"] == 3
    assert data["tenants"] == [
        {
            "tenant_id": data["tenants"][0]["tenant_id"],
            "tenant": "acme-ops",
            "requests": 3,
            "cancelled": 0,
            "failed": 0,
            "prompt_tokens": 240,
            "completion_tokens": 60,
        }
    ]


def test_stale_health_reads_as_unknown(client, staff, db):
    ModelWorkerFactory(name="old", healthy=True, last_health_at=None)
    client.force_login(staff)
    workers = client.get("/console/ops/data.json").json()["workers"]
    assert workers[0]["status"] == "unknown"
    assert workers[0]["stale"] is True


def test_metrics_endpoint_exports_gateway_and_worker_series(client, pool_rows, settings):
    settings.INFERENCE = {**settings.INFERENCE, "METRICS_BEARER_TOKEN": "s3cret"}
    r = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
    assert r.status_code == 200, r.content
    text = r.content.decode()
    assert 'supportbot_inference_worker_up{role="primary",worker="cpu-primary-1"} 1.0' in text
    assert 'supportbot_inference_worker_up{role="primary",worker="cpu-primary-2"} 0.0' in text
    assert 'supportbot_inference_worker_waiting{worker="cpu-primary-1"} 1.0' in text
    assert "supportbot_inference_ttft_seconds" in text
    assert "supportbot_inference_requests_total" in text


def test_metrics_endpoint_requires_the_bearer_token_when_set(client, db, settings):
    settings.INFERENCE = {**settings.INFERENCE, "METRICS_BEARER_TOKEN": "s3cret"}
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200


def test_metrics_without_a_token_is_401_json(client, db, settings):
    settings.INFERENCE = {**settings.INFERENCE, "METRICS_BEARER_TOKEN": "s3cret"}
    r = client.get("/metrics", HTTP_AUTHORIZATION="Basic czNjcmV0")
    assert r.status_code == 401, r.content
    assert r["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert r.json()["error"]["code"] == "not_authenticated"


def test_metrics_without_a_configured_token_is_closed_outside_debug(client, db, settings):
    settings.INFERENCE = {**settings.INFERENCE, "METRICS_BEARER_TOKEN": ""}
    settings.DEBUG = False
    r = client.get("/metrics", HTTP_AUTHORIZATION="Bearer ")
    assert r.status_code == 401, r.content
    assert "METRICS_TOKEN" in r.json()["error"]["detail"]
    settings.DEBUG = True
    assert client.get("/metrics").status_code == 200


def test_staff_read_metrics_with_their_session(client, staff, settings):
    settings.INFERENCE = {**settings.INFERENCE, "METRICS_BEARER_TOKEN": ""}
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200


@pytest.fixture
def measured_yields():
    """A process yield book with its own Redis keys, holding one skipped, low-yield model."""
    book = yields.YieldBook(prefix=f"sb:test:{uuid.uuid4().hex[:8]}")
    previous = yields.set_book(book)
    for _ in range(12):
        book.record(model="tiny-lm", worker="w1", kept=0, dropped=3, waited_ms=1200.0)
    book.answer_path(path="skipped", reason="low_yield", waited_ms=0.0, model="tiny-lm")
    book.answer_path(path="generated", reason="probe_interval", waited_ms=1200.0, model="tiny-lm")
    async_to_sync(book.aclose)()
    yield book
    yields.set_book(previous)


def test_ops_page_and_data_show_yield_skip_rate_and_wait_per_model(
    client, staff, db, measured_yields
):
    client.force_login(staff)
    html = client.get("/console/ops/").content.decode()
    assert 'data-model="tiny-lm"' in html
    assert "skipping (probing)" in html
    [row] = client.get("/console/ops/data.json").json()["yields"]
    assert row["model"] == "tiny-lm"
    assert (row["samples"], row["yield_rate"], row["skip_rate"]) == (12, 0.0, 0.5)
    assert row["p50_wait_ms"] == 1200.0
    assert row["by_path"] == {"skipped": 1, "generated": 1}


def test_metrics_export_yield_skip_rate_wait_and_answer_paths(client, staff, db, measured_yields):
    client.force_login(staff)
    text = client.get("/metrics").content.decode()
    assert 'supportbot_inference_verified_yield{model="tiny-lm"} 0.0' in text
    assert 'supportbot_inference_yield_samples{model="tiny-lm"} 12.0' in text
    assert 'supportbot_inference_skip_rate{model="tiny-lm"} 0.5' in text
    assert 'supportbot_inference_model_wait_p50_seconds{model="tiny-lm"} 1.2' in text
    assert 'supportbot_answers_total{path="skipped",reason="low_yield"}' in text
    assert 'supportbot_answer_model_wait_seconds_bucket{le="0.05",path="skipped"}' in text
