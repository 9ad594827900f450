import pytest

from knowledge import warmup


@pytest.fixture
def warm(monkeypatch):
    """The process's warm-up state as the test sets it (the real one depends on test order)."""
    state = {"value": warmup.NOT_STARTED}
    monkeypatch.setattr(warmup, "state", lambda: state["value"])
    return state


def test_healthz_answers_without_touching_services(client):
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_readyz_reports_each_check_ok(client, db, warm):
    r = client.get("/readyz")
    assert r.status_code == 200, r.content
    assert r.json()["checks"] == {"database": "ok", "redis": "ok"}


def test_readyz_names_the_failing_check(client, db, settings, tmp_path, warm):
    settings.REDIS_URL = f"unix://{tmp_path}/nothing-listens-here.sock"
    r = client.get("/readyz")
    assert r.status_code == 503, r.content
    body = r.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"].startswith("error:")


def test_a_web_process_is_not_ready_until_its_embedding_model_is_warm(client, db, warm):
    warm["value"] = warmup.WARMING
    r = client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"]["embeddings"] == "warming"

    warm["value"] = warmup.OK
    r = client.get("/readyz")
    assert r.status_code == 200, r.content
    assert r.json()["checks"] == {"database": "ok", "redis": "ok", "embeddings": "ok"}


def test_a_failed_warm_up_keeps_the_process_unready_and_says_why(client, db, warm):
    warm["value"] = "failed: EmbeddingError: no model"
    r = client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"]["embeddings"] == "failed: EmbeddingError: no model"


def test_warm_up_loads_the_model_once_and_reports_ok(settings, monkeypatch):
    from knowledge import embeddings

    calls = []
    monkeypatch.setattr(embeddings, "embed_texts", lambda texts: calls.append(texts) or [[0.0]])
    monkeypatch.setattr(embeddings, "token_embeddings_available", lambda: False)
    monkeypatch.setattr(warmup, "_state", warmup.NOT_STARTED)
    settings.KNOWLEDGE_EMBEDDINGS_WARMUP = True
    threads = []
    real_thread = warmup.threading.Thread

    def thread(**kwargs):
        t = real_thread(**kwargs)
        threads.append(t)
        return t

    monkeypatch.setattr(warmup.threading, "Thread", thread)

    assert warmup.start() is True
    assert warmup.start() is False, "a second start in the same process does nothing"
    threads[0].join(10)
    assert warmup.state() == warmup.OK
    assert len(calls) == 1


def test_warm_up_is_off_when_the_setting_says_so(settings, monkeypatch):
    monkeypatch.setattr(warmup, "_state", warmup.NOT_STARTED)
    settings.KNOWLEDGE_EMBEDDINGS_WARMUP = False
    assert warmup.start() is False
    assert warmup.state() == warmup.NOT_STARTED
