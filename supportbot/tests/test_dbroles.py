"""The embedded default's runtime role: rows only, no power over the audit trail's guard."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from conftest import require_or_skip
from supportbot import devservices

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def app_conn(db):
    require_or_skip(settings.EMBEDDED_POSTGRES, "the runtime role belongs to embedded PostgreSQL")
    url = devservices.postgres_app_role_grant(database=connection.settings_dict["NAME"])
    with psycopg.connect(url) as conn:  # a transaction, rolled back at the end
        yield conn
        conn.rollback()


def refused(conn, sql: str) -> str:
    conn.execute("SAVEPOINT s")
    try:
        conn.execute(sql)
    except psycopg.Error as exc:
        conn.execute("ROLLBACK TO SAVEPOINT s")
        return str(exc)
    conn.execute("ROLLBACK TO SAVEPOINT s")
    return ""


def test_runtime_role_is_no_superuser_and_owns_nothing(app_conn):
    row = app_conn.execute(
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles "
        "WHERE rolname = current_user"
    ).fetchone()
    assert row == (False, False, False, False)
    owned = app_conn.execute(
        "SELECT count(*) FROM pg_class WHERE relowner = "
        "(SELECT oid FROM pg_roles WHERE rolname = current_user)"
    ).fetchone()[0]
    assert owned == 0


def test_runtime_role_appends_audit_events_but_cannot_erase_or_unguard_them(app_conn):
    app_conn.execute(
        "INSERT INTO supportbot_auditevent (actor_type, actor_id, actor_label, action, "
        "target_type, target_id, data, created_at) "
        "VALUES ('system', '', 'test', 'x.y', '', '', '{}', now())"
    )
    assert "permission denied" in refused(app_conn, "TRUNCATE supportbot_auditevent")
    assert "permission denied" in refused(app_conn, "DELETE FROM supportbot_auditevent")
    assert "permission denied" in refused(app_conn, "UPDATE supportbot_auditevent SET action='f'")
    assert "must be owner" in refused(
        app_conn, "ALTER TABLE supportbot_auditevent DISABLE TRIGGER ALL"
    )
    assert "must be owner" in refused(
        app_conn, "DROP TRIGGER supportbot_auditevent_append_only ON supportbot_auditevent"
    )
    assert "permission denied" in refused(app_conn, "SET session_replication_role = replica")
    assert "permission denied" in refused(app_conn, "CREATE TABLE owned_by_app (id int)")


def test_runtime_role_reads_and_writes_the_apps_rows(app_conn, tenant):
    assert app_conn.execute("SELECT count(*) FROM supportbot_tenant").fetchone()[0] >= 0
    # A copy of the fixture's row under another slug: every column the model has today.
    columns = [
        row[0]
        for row in app_conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'supportbot_tenant' AND column_name NOT IN ('id', 'slug')"
        ).fetchall()
    ]
    listed = ", ".join(columns)
    app_conn.execute(
        f"INSERT INTO supportbot_tenant (slug, {listed}) "  # noqa: S608 - catalog names
        f"SELECT 'role-test', {listed} FROM supportbot_tenant WHERE id = %s",
        [tenant.pk],
    )
    app_conn.execute("UPDATE supportbot_tenant SET name = 'R2' WHERE slug = 'role-test'")
    app_conn.execute("DELETE FROM supportbot_tenant WHERE slug = 'role-test'")


@pytest.mark.process
def test_make_run_processes_connect_as_the_runtime_role(tmp_path):
    require_or_skip(settings.EMBEDDED_POSTGRES, "the runtime role belongs to embedded PostgreSQL")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    r = subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.db import connection; c = connection.cursor(); "
            "c.execute('SELECT current_user, (SELECT rolsuper FROM pg_roles "
            "WHERE rolname = current_user)'); print(c.fetchone())",
        ],
        cwd=ROOT,
        env={**env, "SUPPORTBOT_DB_ROLE": "app", "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "('supportbot_app', False)" in r.stdout
