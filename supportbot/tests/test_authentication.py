from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from supportbot.models import ApiKey
from supportbot.services import api_key_create, api_key_revoke


def _get_tenant(raw_key: str | None, header: str | None = None):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    elif raw_key is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client.get("/api/v1/tenant")


def test_valid_key_answers_its_own_tenant(api_key, tenant):
    r = _get_tenant(api_key.raw)
    assert r.status_code == 200, r.content
    assert r.json() == {"slug": "acme-test", "name": "Acme Test"}


def test_valid_key_records_last_used_time(api_key):
    assert api_key.last_used_at is None
    _get_tenant(api_key.raw)
    api_key.refresh_from_db()
    assert api_key.last_used_at is not None
    assert timezone.now() - api_key.last_used_at < timedelta(seconds=30)


def test_missing_key_is_401_with_json_error(db):
    r = _get_tenant(None)
    assert r.status_code == 401, r.content
    assert r.json()["error"]["code"] == "not_authenticated"
    assert r["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Bearer not-a-key",
        "Bearer sb_short_x",
        "Token sb_abcdefgh_" + "x" * 43,
        "Bearer a b",
    ],
)
def test_malformed_key_is_401_with_json_error(db, header):
    r = _get_tenant(None, header=header)
    assert r.status_code == 401, r.content
    body = r.json()["error"]
    assert body["code"] == "authentication_failed"
    assert body["detail"]


def test_unknown_secret_for_known_prefix_is_401(api_key):
    tampered = api_key.raw[:-4] + ("AAAA" if not api_key.raw.endswith("AAAA") else "BBBB")
    r = _get_tenant(tampered)
    assert r.status_code == 401, r.content
    assert "Unknown" in r.json()["error"]["detail"]


def test_revoked_key_is_401(api_key, tenant):
    api_key_revoke(tenant=tenant, key_id=api_key.pk)
    r = _get_tenant(api_key.raw)
    assert r.status_code == 401, r.content
    assert "revoked" in r.json()["error"]["detail"]


def test_key_secret_is_stored_only_as_hash(tenant):
    key, raw = api_key_create(tenant=tenant, name="x")
    secret = raw.split("_", 2)[2]
    row = ApiKey.objects.get(pk=key.pk)
    assert secret not in row.secret_hash
    assert len(row.secret_hash) == 64
    assert raw.startswith(f"sb_{row.prefix}_")


def test_session_user_naming_a_tenant_they_do_not_belong_to_gets_403(agent, other_tenant):
    client = APIClient()
    client.force_authenticate(agent)
    r = client.get("/api/v1/tenant", HTTP_X_SUPPORTBOT_TENANT=other_tenant.slug)
    assert r.status_code == 403, r.content
    assert r.json()["error"]["code"] == "permission_denied"


def test_session_user_gets_their_membership_tenant(agent, tenant):
    client = APIClient()
    client.force_authenticate(agent)
    r = client.get("/api/v1/tenant")
    assert r.status_code == 200, r.content
    assert r.json()["slug"] == tenant.slug


@pytest.mark.parametrize(
    "header",
    [
        "\xa0",  # a no-break space alone
        "   ",  # only whitespace
        "\t",
        "Bearer \xa0",
        "Bearer\xa0sb_abcdefgh_" + "x" * 43,
        "B\xe9arer sb_abcdefgh_" + "x" * 43,
        "\u2603 snowman",
        "Bearer sb_abcdefgh_\x00" + "x" * 43,
        "Bearer sb_abcdefgh_\x7f" + "x" * 43,
        "Basic dXNlcjpwYXNz",
        "Digest username=x",
        "Bearer " + "x" * 20_000,
    ],
)
def test_odd_authorization_header_values_are_401_json_never_500(db, header):
    r = _get_tenant(None, header=header)
    assert r.status_code == 401, r.content
    assert r.json()["error"]["code"] == "authentication_failed"
    assert r["WWW-Authenticate"].startswith("Bearer")


def test_bearer_scheme_is_case_insensitive(api_key):
    r = _get_tenant(None, header=f"bearer {api_key.raw}")
    assert r.status_code == 200, r.content
