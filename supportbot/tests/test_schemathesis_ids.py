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

from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from actions.models import ActionRequest
from actions.tests.shop import shop_connect
from chat.tests.helpcenter import RETURNS_MD, SHIPPING_MD, index_document
from handoffs.models import Handoff
from supportbot.models import AuditEvent
from supportbot.services import api_key_create
from supportbot.tests.factories import MembershipFactory, TenantFactory
from supportbot.tests.webprocs import ROOT, start_web

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

GENERATED_EXAMPLES = 4
SEED = 20261207
WARRANTY_PDF = ROOT / "demo" / "helpcenter" / "warranty.pdf"
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


@dataclass
class World:
    """Ids of real objects; `own` belong to the key's tenant, `foreign` to another tenant."""

    headers: dict[str, str]
    cookies: dict[str, str]
    own: dict[str, Any]
    foreign: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    # Transport arguments: over HTTP, a first message waits for the process to load its
    # embedding model (seconds on a busy 2-core machine; requests' default is 10 s).
    call: dict[str, Any] = field(default_factory=dict)


def _partner(tenant) -> APIClient:
    _key, raw = api_key_create(tenant=tenant, name="schemathesis")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.raw_key = raw
    return client


def _ok(response) -> dict:
    assert 200 <= response.status_code < 300, response.content
    return response.json()


def _conversation(client: APIClient, external_id: str) -> int:
    body = {"customer": {"external_id": external_id, "name": "Dana"}}
    return _ok(client.post("/api/v1/conversations", body, format="json"))["id"]


def _say(client: APIClient, conversation_id: int, client_id: str, text: str) -> dict:
    body = {"client_message_id": client_id, "text": text}
    url = f"/api/v1/conversations/{conversation_id}/messages"
    return _ok(client.post(url, body, format="json"))


def _card(client: APIClient, conversation_id: int, client_id: str, text: str) -> dict:
    card = _say(client, conversation_id, client_id, text)["action"]
    assert card is not None, card
    assert card["needs_confirmation"], card
    return card


@pytest.fixture
def world(transactional_db, settings, orders) -> World:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    tenant = TenantFactory(slug="st-world")
    shop_connect(tenant, orders, timeout_seconds=5.0)
    partner = _partner(tenant)
    admin = MembershipFactory(tenant=tenant, role="admin").user
    admin.is_staff = True  # the ops feed is for staff; the tenant's API for its members
    admin.save(update_fields=["is_staff"])
    session = Client()
    session.force_login(admin)

    returns = index_document(tenant, "Returns and refunds", RETURNS_MD)
    doomed = index_document(tenant, "Shipping", SHIPPING_MD)
    conversation = _conversation(partner, "cust-1001")
    answered = _say(partner, conversation, "w1", "How long do refunds take?")
    to_confirm = _card(partner, conversation, "w2", "please refund $12 for A-1042")
    to_cancel = _card(partner, conversation, "w3", "please refund $13 for A-1042")
    to_approve = _card(partner, conversation, "w4", "please refund $120 for A-1043")
    confirm_url = f"/api/v1/conversations/{conversation}/actions/{to_approve['id']}/confirm"
    approval = _ok(partner.post(confirm_url, {"version": to_approve["version"]}, format="json"))
    assert approval["state"] == "awaiting_approval", approval
    handed = _conversation(partner, "cust-1002")
    handoff = _ok(partner.post(f"/api/v1/conversations/{handed}/handoffs", {}, format="json"))
    gone = _conversation(partner, "cust-gone")

    other = TenantFactory(slug="st-other")
    stranger = _partner(other)
    other_conversation = _conversation(stranger, "cust-globex-only")
    other_said = _say(stranger, other_conversation, "o1", "hello")
    other_handoff = _ok(
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


def _version(handoff_id: int) -> int:
    return Handoff.objects.get(pk=handoff_id).version


def _explicit_steps(w: World) -> list[tuple[str, str, dict]]:
    """(method, path, Case arguments) in an order where each step can succeed.

    An argument may be a function of no arguments, called just before its step (versions
    move as earlier steps run)."""
    own, x = w.own, w.extra
    conv = {"conversation_id": own["conversation_id"]}
    handoff = {"handoff_id": own["handoff_id"]}
    json = "application/json"
    # Schemathesis names a file part after its field plus the extension its magic bytes show
    # (`file.pdf`): a PDF is the one accepted type it recognises.
    upload = {"file": WARRANTY_PDF.read_bytes(), "title": "Warranty"}
    return [
        ("GET", "/api/v1/tenant", {}),
        ("GET", "/api/v1/audit-events", {"query": {"limit": 5}}),
        (
            "GET",
            "/api/v1/audit-events/{event_id}",
            {"path_parameters": {"event_id": own["event_id"]}},
        ),
        (
            "POST",
            "/api/v1/conversations",
            {"body": {"customer": {"external_id": "cust-1003"}}, "media_type": json},
        ),
        ("GET", "/api/v1/conversations/{conversation_id}/messages", {"path_parameters": conv}),
        (
            "POST",
            "/api/v1/conversations/{conversation_id}/messages",
            {
                "path_parameters": conv,
                "body": {"client_message_id": "e1", "text": "How long does shipping take?"},
                "media_type": json,
            },
        ),
        (
            "POST",
            "/api/v1/messages/{message_id}/feedback",
            {
                "path_parameters": {"message_id": own["message_id"]},
                "body": {"rating": "helpful", "comment": "clear"},
                "media_type": json,
            },
        ),
        (
            "POST",
            "/api/v1/conversations/{conversation_id}/actions/{action_id}/confirm",
            {
                "path_parameters": {**conv, "action_id": x["to_confirm"]["id"]},
                "body": {"version": x["to_confirm"]["version"]},
                "media_type": json,
            },
        ),
        (
            "POST",
            "/api/v1/conversations/{conversation_id}/actions/{action_id}/cancel",
            {
                "path_parameters": {**conv, "action_id": x["to_cancel"]["id"]},
                "body": {"version": x["to_cancel"]["version"]},
                "media_type": json,
            },
        ),
        (
            "POST",
            "/console/api/actions/{action_id}/decide",
            {
                "path_parameters": {"action_id": x["to_approve"]},
                "body": lambda: {
                    "decision": "approve",
                    "expected_version": ActionRequest.objects.get(pk=x["to_approve"]).version,
                    "reason": "ok",
                },
                "media_type": json,
            },
        ),
        (
            "POST",
            "/console/api/conversations/{conversation_id}/actions",
            {
                "path_parameters": conv,
                "body": {"tool": "check_order", "order_id": "A-1042"},
                "media_type": json,
            },
        ),
        (
            "POST",
            "/console/api/conversations/{conversation_id}/notes",
            {"path_parameters": conv, "body": {"text": "Called back."}, "media_type": json},
        ),
        ("GET", "/console/api/queue", {}),
        ("GET", "/console/api/handoffs/{handoff_id}", {"path_parameters": handoff}),
        (
            "POST",
            "/console/api/handoffs/{handoff_id}/claim",
            {
                "path_parameters": handoff,
                "body": lambda: {"expected_version": _version(own["handoff_id"])},
                "media_type": json,
            },
        ),
        (
            "POST",
            "/console/api/handoffs/{handoff_id}/reply",
            {"path_parameters": handoff, "body": {"text": "Hello, Dana here."}, "media_type": json},
        ),
        (
            "POST",
            "/console/api/handoffs/{handoff_id}/close",
            {
                "path_parameters": handoff,
                "body": lambda: {
                    "expected_version": _version(own["handoff_id"]),
                    "outcome": "resolved",
                },
                "media_type": json,
            },
        ),
        (
            "POST",
            "/api/v1/conversations/{conversation_id}/handoffs",
            {"path_parameters": conv, "body": {"detail": "VIP"}, "media_type": json},
        ),
        (
            "POST",
            "/console/api/conversations/{conversation_id}/takeover",
            {"path_parameters": {"conversation_id": x["handoff_conversation"]}},
        ),
        ("GET", "/console/api/widget-secret", {}),
        (
            "POST",
            "/console/api/widget-secret/rotate",
            {"body": {"overlap_seconds": 60}, "media_type": json},
        ),
        ("GET", "/console/ops/data.json", {}),
        ("GET", "/api/v1/search", {"query": {"q": "refund"}}),
        ("GET", "/api/v1/knowledge-documents", {"query": {"limit": 5}}),
        (
            "GET",
            "/api/v1/knowledge-documents/{document_id}",
            {"path_parameters": {"document_id": own["document_id"]}},
        ),
        (
            "POST",
            "/api/v1/knowledge-documents",
            {"body": upload, "media_type": "multipart/form-data"},
        ),
        (
            "POST",
            "/api/v1/knowledge-documents/{document_id}/versions",
            {
                "path_parameters": {"document_id": own["document_id"]},
                "body": {"file": upload["file"]},
                "media_type": "multipart/form-data",
            },
        ),
        (
            "DELETE",
            "/api/v1/knowledge-documents/{document_id}",
            {"path_parameters": {"document_id": x["doomed"]}},
        ),
        (
            "GET",
            "/api/v1/customers/{external_id}/export",
            {"path_parameters": {"external_id": own["external_id"]}},
        ),
        (
            "DELETE",
            "/api/v1/customers/{external_id}",
            {"path_parameters": {"external_id": "cust-gone"}},
        ),
    ]


def _send(case, w: World):
    response = case.call(headers=w.headers, cookies=w.cookies, **w.call)
    case.validate_response(response, checks=CHECKS)
    return response


def _run_explicit(api_schema, w: World) -> dict[str, int]:
    """Run every explicit step; return {operation label: status}. Raise on the first failure."""
    statuses: dict[str, int] = {}
    for method, path, arguments in _explicit_steps(w):
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
    partner = _partner(TenantFactory(slug="st-keys"))
    conversation = _conversation(partner, "cust-keys")
    reply = _say(partner, conversation, "k1", "hello")["reply"]["id"]
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
