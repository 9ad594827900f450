"""Real objects for schemathesis runs: the `World` of ids, the partner calls that build it,
and the explicit request of every operation in an order where each can succeed
(supportbot/tests/test_schemathesis_ids.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rest_framework.test import APIClient

from actions.models import ActionRequest
from handoffs.models import Handoff
from supportbot.services import api_key_create
from supportbot.tests.webprocs import ROOT

WARRANTY_PDF = ROOT / "demo" / "helpcenter" / "warranty.pdf"


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


def partner_client(tenant) -> APIClient:
    """An in-process partner client of `tenant` with a new key (`raw_key` for other clients)."""
    _key, raw = api_key_create(tenant=tenant, name="schemathesis")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.raw_key = raw
    return client


def ok_json(response) -> dict:
    assert 200 <= response.status_code < 300, response.content
    return response.json()


def conversation_create(client: APIClient, external_id: str) -> int:
    body = {"customer": {"external_id": external_id, "name": "Dana"}}
    return ok_json(client.post("/api/v1/conversations", body, format="json"))["id"]


def say(client: APIClient, conversation_id: int, client_id: str, text: str) -> dict:
    body = {"client_message_id": client_id, "text": text}
    url = f"/api/v1/conversations/{conversation_id}/messages"
    return ok_json(client.post(url, body, format="json"))


def refund_card(client: APIClient, conversation_id: int, client_id: str, text: str) -> dict:
    """Say `text` and return the refund card it proposes for confirmation."""
    card = say(client, conversation_id, client_id, text)["action"]
    assert card is not None, card
    assert card["needs_confirmation"], card
    return card


def _version(handoff_id: int) -> int:
    return Handoff.objects.get(pk=handoff_id).version


def explicit_steps(w: World) -> list[tuple[str, str, dict]]:
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
