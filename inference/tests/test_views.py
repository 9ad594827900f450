import pytest
from django.utils import timezone

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
    client.force_login(UserFactory(username="agent-x", is_staff=False))
    assert client.get("/console/ops/").status_code == 302
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
