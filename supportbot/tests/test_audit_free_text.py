"""Audit rows hold ids and reason codes, never a customer's words: the trail is append-only
and outlives an erasure. Rows written before are scrubbed by migration 0011."""

from __future__ import annotations

import importlib
import uuid

import pytest
from django.db import DatabaseError, connection, transaction

from conversations import services as conversation_services
from handoffs import services as handoff_services
from supportbot.models import AuditEvent
from supportbot.services import Actor, audit_code, audit_event_record

scrub = importlib.import_module("supportbot.migrations.0011_audit_scrub_free_text")


class _Editor:
    def __init__(self) -> None:
        self.connection = connection


def test_a_handoff_request_audits_its_reason_code_not_what_the_customer_typed(tenant):
    words = f"my card is 4{uuid.uuid4().int % 10**15:015d}"
    customer = conversation_services.customer_get_or_create_verified(
        tenant=tenant, external_id="aud-1"
    )
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    handoff, _ = handoff_services.handoff_request(
        conversation=conversation, reason="customer_request", detail=words
    )
    event = AuditEvent.objects.get(action="handoff.requested", target_id=str(handoff.pk))
    assert event.data == {"conversation_id": conversation.pk, "reason": "customer_request"}
    assert handoff.reason_detail == words  # kept, sealed, on the handoff (erased with it)


@pytest.mark.parametrize(
    ("value", "code"),
    [("order_not_found", "order_not_found"), ("card 4111 1111", "other"), ("x" * 65, "other")],
)
def test_audit_code_keeps_codes_and_replaces_sentences(value, code):
    assert audit_code(value) == code


def test_migration_drops_free_text_of_existing_rows_and_keeps_ids_and_codes(tenant):
    secret = f"SSN 123-45-{uuid.uuid4().int % 10000:04d}"
    system = Actor.system("old")
    rows = [
        ("handoff.requested", {"conversation_id": 7, "reason": "weak_evidence", "detail": secret}),
        ("action.denied", {"tool": "request_refund", "by": "dana", "reason": secret}),
        (
            "action.proposal_rejected",
            {"tool": f"refund {secret}", "code": "unknown_tool", "detail": secret, "field": "a b"},
        ),
        ("action.failed", {"code": secret, "status": 422, "detail": secret}),
        ("action.unknown", {"code": "timeout", "detail": secret}),
        ("knowledge.document.uploaded", {"title": "Returns policy", "size": 10}),
    ]
    for action, data in rows:
        audit_event_record(tenant=tenant, actor=system, action=action, data=data)

    scrub.audit_scrub_free_text(None, _Editor())
    scrub.audit_scrub_free_text(None, _Editor())  # safe to run twice

    data = dict(AuditEvent.objects.filter(tenant=tenant).values_list("action", "data"))
    assert secret not in str(data)
    assert data["handoff.requested"] == {"conversation_id": 7, "reason": "weak_evidence"}
    assert data["action.denied"] == {"tool": "request_refund", "by": "dana"}
    assert data["action.proposal_rejected"] == {
        "tool": "unknown",
        "code": "unknown_tool",
        "field": None,
    }
    assert data["action.failed"] == {"code": "other", "status": 422}
    assert data["action.unknown"] == {"code": "timeout"}
    assert data["knowledge.document.uploaded"] == {"title": "Returns policy", "size": 10}
    # The append-only guard is back on afterwards.
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditEvent.objects.filter(tenant=tenant).update(action="x")
