"""Schemathesis with real ids: every operation of `/api/schema/` answers a 2xx at least once
with a body that conforms, and generated requests aimed at real objects conform too.

`world` creates real objects for the partner key's tenant (conversations, messages, refund
cards in three states, a handoff, documents, customers; the reference order service behind
the tenant's shop) and, for a second tenant, objects whose ids must never answer a 2xx.

Two phases per run:
1. explicit cases (`operation.Case(...)`) in an order that makes each succeed: the state
   they need (a claimed handoff before a reply, an action awaiting approval before a decision)
   comes from `world` or an earlier step;
2. generated cases (`operation.as_strategy()`) whose path parameters are replaced by this
   tenant's or the other tenant's real ids; the other tenant's never answer a 2xx.
One run is derandomized over a real daphne process (HTTP, the schema fetched from it), one is
seeded and in process (WSGI).
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from actions.models import ActionRequest
from actions.tests.shop import shop_connect
from chat.tests.helpcenter import RETURNS_MD, SHIPPING_MD, index_document
from supportbot.models import AuditEvent
from supportbot.tests.factories import MembershipFactory, TenantFactory
from supportbot.tests.schemathesis_world import (
    World,
    conversation_create,
    explicit_steps,
    ok_json,
    partner_client,
    refund_card,
    say,
)
from supportbot.tests.webprocs import start_web

pytestmark = [pytest.mark.django_db(transaction=True)]

GENERATED_EXAMPLES = 4
SEED = 20261207
CSRF = "schemathesis0csrf0token000000000"  # an unmasked 32-character CSRF secret
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# The daphne process counts requests in Redis like production; the run sends a few hundred.
GENEROUS = "100000/60"
LIMIT_ENV = {
    f"RATE_LIMIT_{name}": GENEROUS
    for name in (
        "API_KEY",
        "API_USER",
        "MESSAGE_CUSTOMER",
        "MESSAGE_CONVERSATION",
        "MESSAGE_IP",
        "HANDOFF_CONVERSATION",
        "HANDOFF_CUSTOMER",
        "UPLOAD_KEY",
        "SEARCH_KEY",
    )
}


@pytest.fixture
def world(transactional_db, settings, orders) -> World:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    tenant = TenantFactory(slug="st-world")
    shop_connect(tenant, orders, timeout_seconds=5.0)
    partner = partner_client(tenant)
    admin = MembershipFactory(tenant=tenant, role="admin").user
    admin.is_staff = True  # the ops feed is for staff; the tenant's API for its members
    admin.save(update_fields=["is_staff"])
    session = Client()
    session.force_login(admin)

    returns = index_document(tenant, "Returns and refunds", RETURNS_MD)
    doomed = index_document(tenant, "Shipping", SHIPPING_MD)
    conversation = conversation_create(partner, "cust-1001")
    answered = say(partner, conversation, "w1", "How long do refunds take?")
    to_confirm = refund_card(partner, conversation, "w2", "please refund $12 for A-1042")
    to_cancel = refund_card(partner, conversation, "w3", "please refund $13 for A-1042")
    to_approve = refund_card(partner, conversation, "w4", "please refund $120 for A-1043")
    confirm_url = f"/api/v1/conversations/{conversation}/actions/{to_approve['id']}/confirm"
    approval = ok_json(partner.post(confirm_url, {"version": to_approve["version"]}, format="json"))
    assert approval["state"] == "awaiting_approval", approval
    handed = conversation_create(partner, "cust-1002")
    handoff = ok_json(partner.post(f"/api/v1/conversations/{handed}/handoffs", {}, format="json"))
    gone = conversation_create(partner, "cust-gone")

    other = TenantFactory(slug="st-other")
    stranger = partner_client(other)
    other_conversation = conversation_create(stranger, "cust-globex-only")
    other_said = say(stranger, other_conversation, "o1", "hello")
    other_handoff = ok_json(
        stranger.post(f"/api/v1/conversations/{other_conversation}/handoffs", {}, format="json")
    )
    other_document = index_document(other, "Other returns", RETURNS_MD)
    return World(
        headers={"Authorization": f"Bearer {partner.raw_key}", "X-CSRFToken": CSRF},
        cookies={"sessionid": session.cookies["sessionid"].value, "csrftoken": CSRF},
        own={
            "conversation_id": conversation,
            "message_id": answered["reply"]["id"],
            "document_id": returns.pk,
            "handoff_id": handoff["id"],
            "action_id": to_confirm["id"],
            "external_id": "cust-1001",
            "event_id": AuditEvent.objects.filter(tenant=tenant).latest("pk").pk,
        },
        foreign={
            "conversation_id": other_conversation,
            "message_id": other_said["message"]["id"],
            "document_id": other_document.pk,
            "handoff_id": other_handoff["id"],
            "action_id": ActionRequest.objects.order_by("pk").last().pk + 1000,
            "external_id": "cust-globex-only",
            "event_id": AuditEvent.objects.filter(tenant=other).latest("pk").pk,
        },
        extra={
            "to_confirm": to_confirm,
            "to_cancel": to_cancel,
            "to_approve": to_approve["id"],
            "doomed": doomed.pk,
            "handoff_conversation": handed,
            "gone": gone,
        },
    )


def _send(case, w: World):
    response = case.call(headers=w.headers, cookies=w.cookies, **w.call)
    case.validate_response(response, checks=CHECKS)
    return response


def _run_explicit(api_schema, w: World) -> dict[str, int]:
    """Run every explicit step; return {operation label: status}. Raise on the first failure."""
    statuses: dict[str, int] = {}
    for method, path, arguments in explicit_steps(w):
        operation = api_schema[path][method]
        arguments = {k: v() if callable(v) else v for k, v in arguments.items()}
        response = _send(operation.Case(**arguments), w)
        assert 200 <= response.status_code < 300, (method, path, response.text[:800])
        statuses[operation.label] = response.status_code
    return statuses


def _run_generated(api_schema, w: World, *, seeded: int | None) -> dict[str, str]:
    """Generated cases on every operation with real ids in the path; return failures."""
    failures: dict[str, str] = {}
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy(), own=st.booleans())
        @settings(
            max_examples=GENERATED_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=seeded is None,
            database=None,
        )
        def run(case, own):
            ids = w.own if own else w.foreign
            for name in case.path_parameters:
                case.path_parameters[name] = ids[name]
            response = _send(case, w)
            if not own and case.path_parameters:
                assert not 200 <= response.status_code < 300, (
                    f"another tenant's ids {case.path_parameters} answered "
                    f"{response.status_code}: {response.text[:300]}"
                )

        if seeded is not None:
            run = seed(seeded)(run)
        try:
            run()
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - reported together below
            failures[operation.label] = str(exc)[:1500]
    return failures


def _assert_every_operation_succeeded(api_schema, statuses: dict[str, int]) -> None:
    labels = {result.ok().label for result in api_schema.get_all_operations()}
    assert len(labels) >= 30
    assert labels == set(statuses), sorted(labels - set(statuses))


@pytest.mark.slow
def test_every_operation_succeeds_with_real_ids_over_daphne_derandomized(
    world, django_db_blocker, tmp_path
):
    """Real HTTP to a daphne process: the schema it serves, explicit then derandomized cases."""
    with django_db_blocker.unblock():
        (web,) = start_web(tmp_path, count=1, env=LIMIT_ENV)
    try:
        api_schema = schemathesis.openapi.from_url(f"{web.url}/api/schema/")
        world.call = {"timeout": 120}
        statuses = _run_explicit(api_schema, world)
        _assert_every_operation_succeeded(api_schema, statuses)
        failures = _run_generated(api_schema, world, seeded=None)
    finally:
        web.stop()
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


@pytest.mark.slow
def test_every_operation_succeeds_with_real_ids_in_process_seeded(world):
    """In process (WSGI): explicit cases, then generated cases from a fixed seed."""
    api_schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    statuses = _run_explicit(api_schema, world)
    _assert_every_operation_succeeded(api_schema, statuses)
    failures = _run_generated(api_schema, world, seeded=SEED)
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def test_feedback_and_handoff_document_their_reused_key_and_invalid_field_answers(
    transactional_db, settings
):
    """A reused Idempotency-Key (422) and a too-long handoff detail (400) conform to the schema."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    partner = partner_client(TenantFactory(slug="st-keys"))
    conversation = conversation_create(partner, "cust-keys")
    reply = say(partner, conversation, "k1", "hello")["reply"]["id"]
    w = World(
        headers={"Authorization": f"Bearer {partner.raw_key}"}, cookies={}, own={}, foreign={}
    )
    api_schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    handoffs = api_schema["/api/v1/conversations/{conversation_id}/handoffs"]["POST"]
    feedback = api_schema["/api/v1/messages/{message_id}/feedback"]["POST"]
    json = "application/json"
    key = {"Idempotency-Key": "st-reused-key"}

    too_long = handoffs.Case(
        path_parameters={"conversation_id": conversation},
        body={"detail": "x" * 301},
        media_type=json,
    )
    assert _send(too_long, w).status_code == 400
    first = handoffs.Case(
        path_parameters={"conversation_id": conversation}, headers=key, body={}, media_type=json
    )
    assert _send(first, w).status_code == 201
    rated = feedback.Case(
        path_parameters={"message_id": reply},
        headers=key,
        body={"rating": "helpful"},
        media_type=json,
    )
    assert _send(rated, w).status_code == 422
    rated_first = feedback.Case(
        path_parameters={"message_id": reply},
        headers={"Idempotency-Key": "st-other-key"},
        body={"rating": "helpful"},
        media_type=json,
    )
    assert _send(rated_first, w).status_code == 200
    handed_again = handoffs.Case(
        path_parameters={"conversation_id": conversation},
        headers={"Idempotency-Key": "st-other-key"},
        body={},
        media_type=json,
    )
    assert _send(handed_again, w).status_code == 422
