import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from supportbot.models import ApiKey, AuditEvent, Tenant
from supportbot.services import api_key_authenticate

ROOT = Path(__file__).resolve().parents[2]


def _test_db_url() -> str:
    s = connection.settings_dict
    return f"postgresql://{s['USER']}:@/{s['NAME']}?host={s['HOST']}"


def test_create_tenant_prints_the_id(db, capsys):
    call_command("create_tenant", "initech", "--name", "Initech")
    out = capsys.readouterr().out.strip()
    assert Tenant.objects.get(slug="initech").pk == int(out)


@pytest.mark.parametrize("slug", ["Bad Slug", "_edge", "edge-", "UPPER", "a" * 51, "semi;colon"])
def test_create_tenant_rejects_bad_characters_and_changes_nothing(db, slug):
    before = (Tenant.objects.count(), AuditEvent.objects.count())
    with pytest.raises(CommandError, match="Invalid slug"):
        call_command("create_tenant", slug, "--name", "X")
    assert (Tenant.objects.count(), AuditEvent.objects.count()) == before


def test_create_tenant_with_duplicate_slug_changes_nothing(tenant):
    before = (Tenant.objects.count(), AuditEvent.objects.count())
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_tenant", tenant.slug, "--name", "Other name")
    tenant.refresh_from_db()
    assert tenant.name == "Acme Test"
    assert (Tenant.objects.count(), AuditEvent.objects.count()) == before


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_create_tenant_exits_non_zero_from_the_shell():
    env = {**os.environ, "DATABASE_URL": _test_db_url()}
    ok = subprocess.run(
        [sys.executable, "manage.py", "create_tenant", "shell-co", "--name", "Shell Co"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    dup = subprocess.run(
        [sys.executable, "manage.py", "create_tenant", "shell-co", "--name", "Again"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dup.returncode != 0
    assert "already exists" in dup.stderr
    assert Tenant.objects.get(slug="shell-co").name == "Shell Co"


def test_create_api_key_prints_a_working_key_once(tenant, capsys):
    call_command("create_api_key", tenant.slug, "--name", "crm")
    raw = capsys.readouterr().out.strip()
    assert api_key_authenticate(raw_key=raw).tenant == tenant
    assert ApiKey.objects.get(tenant=tenant, name="crm").secret_hash not in raw


def test_create_api_key_for_unknown_tenant_fails(db):
    with pytest.raises(CommandError, match="No tenant"):
        call_command("create_api_key", "nope", "--name", "x")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--name", "x" * 101], "at most 100 characters"),
        (["--name", "crm", "--segments", "vip,Not Valid!"], "Invalid segment"),
    ],
)
def test_create_api_key_refuses_a_long_name_or_a_bad_segment_and_writes_nothing(
    tenant, args, message
):
    with pytest.raises(CommandError, match=message):
        call_command("create_api_key", tenant.slug, *args)
    assert not ApiKey.objects.exists()
    assert not AuditEvent.objects.filter(action="api_key.created").exists()


def test_seed_demo_is_idempotent(db, capsys):
    call_command("seed_demo")
    first = capsys.readouterr().out
    counts = (Tenant.objects.count(), AuditEvent.objects.count())
    call_command("seed_demo")
    assert (Tenant.objects.count(), AuditEvent.objects.count()) == counts
    second = capsys.readouterr().out
    assert "queued for indexing" not in second  # nothing new to index
    assert second.splitlines()[-3:] == first.splitlines()[-3:]  # same logins
    acme = Tenant.objects.get(slug="acme")
    roles = sorted(acme.memberships.values_list("role", flat=True))
    assert roles == ["admin", "agent", "agent"]
