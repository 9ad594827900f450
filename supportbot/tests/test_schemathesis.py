"""Schemathesis against `/api/schema/` (partner and console API): property-based requests for
every operation, in process (WSGI), with a partner key and a tenant admin's session.

Checks: no 5xx, status codes, content types and bodies as the schema documents them. Bounded
by `MAX_EXAMPLES` per operation so the run takes a few minutes.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from supportbot.services import api_key_create
from supportbot.tests.factories import MembershipFactory, TenantFactory

MAX_EXAMPLES = 6
CSRF = "schemathesis0csrf0token000000000"  # an unmasked 32-character CSRF secret
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def api_schema(transactional_db):
    return schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@pytest.fixture
def credentials(transactional_db, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    tenant = TenantFactory(slug="st-acme")
    _key, raw = api_key_create(tenant=tenant, name="schemathesis")
    admin = MembershipFactory(tenant=tenant, role="admin").user
    client = Client()
    client.force_login(admin)
    return {
        "headers": {"Authorization": f"Bearer {raw}", "X-CSRFToken": CSRF},
        "cookies": {"sessionid": client.cookies["sessionid"].value, "csrftoken": CSRF},
    }


def test_schema_has_the_partner_and_console_operations(api_schema):
    paths = set(api_schema.raw_schema["paths"])
    assert "/api/v1/conversations/{conversation_id}/messages" in paths
    assert "/console/api/handoffs/{handoff_id}/claim" in paths
    assert "/console/api/widget-secret/rotate" in paths


@pytest.mark.slow
def test_api_conforms_to_its_schema_and_never_answers_5xx(api_schema, credentials):
    """Every operation, `MAX_EXAMPLES` generated requests each (schemathesis strategies run
    by hypothesis here: its pytest plugin does not run under this pytest)."""
    failures: dict[str, str] = {}
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 25

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case):
            response = case.call(headers=credentials["headers"], cookies=credentials["cookies"])
            case.validate_response(response, checks=CHECKS)

        try:
            run()
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - reported together below
            failures[operation.label] = str(exc)[:1500]
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
