"""Secure defaults of the settings module, loaded in subprocesses with production variables."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from supportbot import devservices, keys

ROOT = Path(__file__).resolve().parents[2]
# Unreachable on purpose: loading settings and `check --deploy` must not connect anywhere.
PRODUCTION = {
    "DATABASE_URL": "postgresql://supportbot@127.0.0.1:9/supportbot",
    "REDIS_URL": "redis://127.0.0.1:9/0",
    "DJANGO_ALLOWED_HOSTS": "support.example.com",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://support.example.com",
    "ENCRYPTION_MASTER_KEYS": "k1=" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    "BLIND_INDEX_KEYS": "b1=" + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
}


def run_django(tmp_path, args: list[str], **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "SECURE_", "SESSION_", "CSRF_", "METRICS_"))
        and k
        not in (
            "DATABASE_URL",
            "REDIS_URL",
            "TRUSTED_PROXIES",
            "ACTIONS_ENCRYPTION_KEY",
            "ENCRYPTION_MASTER_KEYS",
            "BLIND_INDEX_KEYS",
            "SUPPORTBOT_ENV",
        )
    }
    return subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, *args],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SUPPORTBOT_VAR_DIR": str(tmp_path / "var"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.process
def test_settings_refuse_to_load_without_a_secret_when_debug_is_off(tmp_path):
    r = run_django(tmp_path, ["manage.py", "check"], **PRODUCTION)
    assert r.returncode != 0, r.stdout
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in r.stderr
    assert not (tmp_path / "var" / keys.SECRET_FILE_NAME).exists()


@pytest.mark.process
def test_check_deploy_reports_nothing_with_production_settings(tmp_path):
    r = run_django(
        tmp_path,
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        **PRODUCTION,
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        SECURE_HSTS_PRELOAD="true",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "System check identified no issues (0 silenced)." in r.stdout, r.stdout + r.stderr
    # Loading production settings starts nothing embedded and writes no key of its own.
    assert not (tmp_path / "var" / "pg").exists()
    assert not (tmp_path / "var" / "valkey").exists()
    assert not (tmp_path / "var" / keys.SECRET_FILE_NAME).exists()


@pytest.mark.process
def test_production_settings_default_to_https_only_cookies_and_redirects(tmp_path):
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({k: getattr(s, k) for k in ["
        "'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SESSION_COOKIE_HTTPONLY', "
        "'CSRF_COOKIE_HTTPONLY', 'SESSION_COOKIE_SAMESITE', 'SECURE_SSL_REDIRECT', "
        "'SECURE_HSTS_SECONDS', 'X_FRAME_OPTIONS', 'ACTIONS_ENCRYPTION_KEY', 'TRUSTED_PROXIES']}))"
    )
    secret = secrets.token_urlsafe(64)
    r = run_django(
        tmp_path,
        ["-c", code],
        **PRODUCTION,
        DJANGO_SECRET_KEY=secret,
        TRUSTED_PROXIES="10.0.0.0/8, 192.168.1.7",
    )
    assert r.returncode == 0, r.stderr
    values = json.loads(r.stdout.strip().splitlines()[-1])
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
    assert values["SESSION_COOKIE_HTTPONLY"] is True
    assert values["CSRF_COOKIE_HTTPONLY"] is True
    assert values["SESSION_COOKIE_SAMESITE"] == "Lax"
    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SECURE_HSTS_SECONDS"] >= 31536000
    assert values["X_FRAME_OPTIONS"] == "DENY"
    assert values["TRUSTED_PROXIES"] == ["10.0.0.0/8", "192.168.1.7/32"]
    assert values["ACTIONS_ENCRYPTION_KEY"] == keys.derive_fernet_key(secret, "actions-credentials")


@pytest.mark.process
def test_settings_refuse_to_load_without_a_master_key_in_production(tmp_path):
    env = {k: v for k, v in PRODUCTION.items() if k != "ENCRYPTION_MASTER_KEYS"}
    r = run_django(
        tmp_path, ["manage.py", "check"], **env, DJANGO_SECRET_KEY=secrets.token_urlsafe(64)
    )
    assert r.returncode != 0, r.stdout
    assert "ImproperlyConfigured: ENCRYPTION_MASTER_KEYS is not set" in r.stderr
    assert not (tmp_path / "var" / keys.MASTER_KEY_FILE_NAME).exists()


@pytest.mark.process
def test_settings_refuse_to_load_without_blind_index_keys_in_production(tmp_path):
    env = {k: v for k, v in PRODUCTION.items() if k != "BLIND_INDEX_KEYS"}
    r = run_django(
        tmp_path, ["manage.py", "check"], **env, DJANGO_SECRET_KEY=secrets.token_urlsafe(64)
    )
    assert r.returncode != 0, r.stdout
    assert "ImproperlyConfigured: BLIND_INDEX_KEYS is not set" in r.stderr
    assert not (tmp_path / "var" / keys.BLIND_INDEX_KEY_FILE_NAME).exists()


@pytest.mark.process
@pytest.mark.parametrize("keyring", ["b1", "b1=short", f"b1={'A' * 43},b1={'B' * 43}"])
def test_a_malformed_blind_index_keyring_stops_the_start(tmp_path, keyring):
    r = run_django(
        tmp_path,
        ["manage.py", "check"],
        **{**PRODUCTION, "BLIND_INDEX_KEYS": keyring},
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
    )
    assert r.returncode != 0
    assert "ImproperlyConfigured: BLIND_INDEX_KEYS:" in r.stderr


@pytest.mark.parametrize(
    "keyring",
    ["k1", "k1=short", "k1=@@@@", "k 1=" + "A" * 43, f"k1={'A' * 43},k1={'B' * 43}"],
)
@pytest.mark.process
def test_a_malformed_master_keyring_stops_the_start(tmp_path, keyring):
    r = run_django(
        tmp_path,
        ["manage.py", "check"],
        **{**PRODUCTION, "ENCRYPTION_MASTER_KEYS": keyring},
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
    )
    assert r.returncode != 0
    assert "ImproperlyConfigured: ENCRYPTION_MASTER_KEYS:" in r.stderr


def test_dev_master_keyring_is_random_private_and_kept(tmp_path):
    first = keys.dev_master_keyring(tmp_path / "a")
    path = tmp_path / "a" / keys.MASTER_KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ring = keys.parse_master_keyring([first])
    assert [len(k) for k in ring.values()] == [32]
    assert keys.dev_master_keyring(tmp_path / "a") == first
    assert keys.dev_master_keyring(tmp_path / "b") != first


@pytest.mark.process
def test_a_bad_trusted_proxy_entry_stops_the_start(tmp_path):
    r = run_django(
        tmp_path,
        ["manage.py", "check"],
        **PRODUCTION,
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        TRUSTED_PROXIES="10.0.0.0/8,proxy.internal",
    )
    assert r.returncode != 0
    assert "TRUSTED_PROXIES: 'proxy.internal' is not an IP address" in r.stderr


def test_dev_secret_is_random_private_and_kept(tmp_path):
    first = keys.dev_secret_key(tmp_path / "a")
    path = tmp_path / "a" / keys.SECRET_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first) >= 64
    assert keys.dev_secret_key(tmp_path / "a") == first
    assert keys.dev_secret_key(tmp_path / "b") != first
    assert str(tmp_path) not in first


def test_dev_secret_file_with_open_permissions_is_made_private(tmp_path):
    keys.dev_secret_key(tmp_path)
    path = tmp_path / keys.SECRET_FILE_NAME
    path.chmod(0o644)
    keys.dev_secret_key(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.skipif(
    bool(os.environ.get("DJANGO_SECRET_KEY")), reason="an explicit secret key is configured"
)
def test_embedded_dev_uses_the_generated_secret_not_a_predictable_one():
    stored = (settings.VAR_DIR / keys.SECRET_FILE_NAME).read_text().strip()
    assert stored == settings.SECRET_KEY
    assert "insecure" not in settings.SECRET_KEY
    assert str(settings.VAR_DIR) not in settings.SECRET_KEY


def test_actions_key_is_derived_with_hkdf_and_reveals_no_secret():
    expected = keys.derive_fernet_key(settings.SECRET_KEY, "actions-credentials")
    if not os.environ.get("ACTIONS_ENCRYPTION_KEY"):
        assert expected == settings.ACTIONS_ENCRYPTION_KEY
    old = base64.urlsafe_b64encode(
        hashlib.sha256(f"actions-credentials:{settings.SECRET_KEY}".encode()).digest()
    ).decode()
    assert expected != old
    assert keys.derive_fernet_key(settings.SECRET_KEY, "other") != expected
    assert len(base64.urlsafe_b64decode(expected)) == 32


def test_only_the_embedded_servers_socket_counts_as_development(tmp_path, monkeypatch):
    monkeypatch.setenv("SUPPORTBOT_VAR_DIR", str(tmp_path))
    pg = tmp_path / "pg"
    assert devservices.is_embedded_postgres_url(f"postgresql://postgres:@/supportbot?host={pg}")
    assert not devservices.is_embedded_postgres_url(
        f"postgresql://postgres:@/supportbot?host={tmp_path / 'other'}"
    )
    assert not devservices.is_embedded_postgres_url("postgresql://sb:pw@db.internal:5432/sb")
    assert not devservices.is_embedded_postgres_url("postgresql://sb@/sb?host=/var/run/postgresql")


SECURE_VALUES = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({k: getattr(s, k) for k in ['SUPPORTBOT_ENV', 'SESSION_COOKIE_SECURE', "
    "'CSRF_COOKIE_SECURE', 'SECURE_SSL_REDIRECT', 'SECURE_HSTS_SECONDS', "
    "'SECURE_REDIRECT_EXEMPT']}))"
)


def _values(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.process
def test_production_is_said_by_supportbot_env_not_guessed_from_the_database(tmp_path):
    # No DATABASE_URL (the embedded default): still production unless told otherwise.
    keys_only = {k: v for k, v in PRODUCTION.items() if k != "DATABASE_URL"}
    refused = run_django(tmp_path, ["manage.py", "check"], **keys_only)
    assert refused.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in refused.stderr
    values = _values(
        run_django(tmp_path, ["-c", SECURE_VALUES], **keys_only, DJANGO_SECRET_KEY="x" * 64)
    )
    assert values["SUPPORTBOT_ENV"] == "production"
    assert values["SESSION_COOKIE_SECURE"] is values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SECURE_HSTS_SECONDS"] >= 31536000
    # Prometheus scrapes /metrics over plain http inside the cluster, like the probes.
    assert {"^healthz$", "^readyz$", "^metrics$"} <= set(values["SECURE_REDIRECT_EXEMPT"])


@pytest.mark.process
def test_production_with_debug_on_keeps_the_secure_defaults(tmp_path):
    values = _values(
        run_django(
            tmp_path,
            ["-c", SECURE_VALUES],
            **PRODUCTION,
            DJANGO_SECRET_KEY="x" * 64,
            DJANGO_DEBUG="1",
        )
    )
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["SECURE_SSL_REDIRECT"] is True


@pytest.mark.process
def test_development_serves_plain_http_whatever_the_database(tmp_path):
    values = _values(
        run_django(
            tmp_path,
            ["-c", SECURE_VALUES],
            **PRODUCTION,
            DJANGO_SECRET_KEY="x" * 64,
            SUPPORTBOT_ENV="development",
        )
    )
    assert values["SUPPORTBOT_ENV"] == "development"
    assert values["SESSION_COOKIE_SECURE"] is False
    assert values["SECURE_SSL_REDIRECT"] is False
    assert values["SECURE_HSTS_SECONDS"] == 0


@pytest.mark.process
def test_an_unknown_supportbot_env_stops_the_start(tmp_path):
    r = run_django(tmp_path, ["manage.py", "check"], SUPPORTBOT_ENV="prod")
    assert r.returncode != 0
    assert "SUPPORTBOT_ENV='prod'" in r.stderr


def test_every_way_of_starting_says_which_environment_it_is():
    assert "export SUPPORTBOT_ENV ?= development" in (ROOT / "Makefile").read_text()
    assert "SUPPORTBOT_ENV=test" in (ROOT / "Makefile").read_text()
    assert "export SUPPORTBOT_ENV=test" in (ROOT / ".ci" / "run").read_text()
    assert (
        "SUPPORTBOT_ENV=${SUPPORTBOT_ENV:-development}" in (ROOT / "scripts" / "run.sh").read_text()
    )
    assert "SUPPORTBOT_ENV=production" in (ROOT / "Dockerfile").read_text()
    assert (
        "SUPPORTBOT_ENV: production"
        in (ROOT / "deploy" / "k8s" / "base" / "configmap.yaml").read_text()
    )
    # This very run: the pytest plugin said `test` before settings were read.
    assert settings.SUPPORTBOT_ENV == "test"
    assert settings.SESSION_COOKIE_SECURE is False


def test_websockets_are_not_kept_open_for_a_day():
    for script in (ROOT / "scripts" / "run.sh", ROOT / "deploy" / "entrypoint.sh"):
        text = script.read_text()
        assert "--websocket_timeout" in text, script
        assert "DAPHNE_WEBSOCKET_TIMEOUT_S:-3600" in text, script
