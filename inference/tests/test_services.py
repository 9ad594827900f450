import pytest

from inference import services
from inference.models import ModelWorker
from inference.tests.factories import ModelWorkerFactory
from supportbot.tests.factories import TenantFactory


def test_parse_external_workers_accepts_urls_and_url_role_model():
    specs = services.parse_external_workers(
        "http://10.0.0.5:8000/, http://gpu-b:8000|fallback|llama ,", default_model="smollm2-135m"
    )
    assert [(s.base_url, s.role, s.model_name) for s in specs] == [
        ("http://10.0.0.5:8000", "primary", "smollm2-135m"),
        ("http://gpu-b:8000", "fallback", "llama"),
    ]


@pytest.mark.parametrize("value", ["gpu-b:8000", "http://x:1|boss"])
def test_parse_external_workers_rejects_bad_entries(value):
    with pytest.raises(ValueError, match="INFERENCE_WORKERS"):
        services.parse_external_workers(value, default_model="m")


def test_sync_external_registers_ready_rows_idempotently(db):
    specs = services.parse_external_workers("http://a:8000|small", default_model="m")
    services.workers_sync_external(specs=specs)
    services.workers_sync_external(specs=specs)
    rows = list(ModelWorker.objects.all())
    assert len(rows) == 1
    assert (rows[0].source, rows[0].state, rows[0].role) == ("external", "ready", "small")


def test_register_replaces_a_row_with_the_same_name_or_url(db):
    ModelWorkerFactory(name="cpu-1", base_url="http://127.0.0.1:8100", healthy=True)
    ModelWorkerFactory(name="stale", base_url="http://127.0.0.1:8101")
    w = services.worker_register(
        name="cpu-1", base_url="http://127.0.0.1:8101", model_name="m", pid=4
    )
    assert ModelWorker.objects.count() == 1
    assert (w.base_url, w.state, w.healthy, w.pid) == (
        "http://127.0.0.1:8101",
        "starting",
        False,
        4,
    )


def test_register_rejects_unknown_role(db):
    with pytest.raises(ValueError, match="role"):
        services.worker_register(name="x", base_url="http://x:1", model_name="m", role="huge")


def test_stopping_a_worker_clears_health(db):
    w = ModelWorkerFactory(healthy=True)
    services.worker_set_state(worker_id=w.id, state="stopped", pid=None)
    w.refresh_from_db()
    assert (w.state, w.healthy, w.pid) == ("stopped", False, None)


def test_usage_record_survives_a_deleted_worker(db):
    tenant = TenantFactory()
    u = services.usage_record(
        tenant_id=tenant.id,
        worker_id=999999,
        worker_name="gone",
        model_name="m",
        role="primary",
        outcome="ok",
        prompt_tokens=1,
        completion_tokens=2,
        ttft_ms=1.0,
        total_ms=2.0,
        itl_ms=[1.23456],
        attempts=1,
    )
    assert u.worker_id is None
    assert u.itl_ms == [1.235]
