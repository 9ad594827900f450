def test_healthz_answers_without_touching_services(client):
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_readyz_reports_each_check_ok(client, db):
    r = client.get("/readyz")
    assert r.status_code == 200, r.content
    assert r.json()["checks"] == {"database": "ok", "redis": "ok"}


def test_readyz_names_the_failing_check(client, db, settings, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/nothing-listens-here.sock"
    r = client.get("/readyz")
    assert r.status_code == 503, r.content
    body = r.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"].startswith("error:")
