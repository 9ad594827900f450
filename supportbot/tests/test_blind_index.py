"""Blind indexes: their own keyring (BLIND_INDEX_KEYS), lookups under every key of it, and
`blind_index_rekey` moving stored ones to the newest key so an old key can go."""

from __future__ import annotations

import os
import stat
import uuid
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from actions.models import ActionRequest
from actions.services.propose import in_flight_for_order, order_key_for
from conversations import services as conversation_services
from supportbot import encryption, keys

K1, K2 = os.urandom(32), os.urandom(32)


@pytest.fixture
def ring(settings):
    def use(**entries: bytes) -> None:
        settings.BLIND_INDEX_KEYS = dict(entries)

    use(k1=K1)
    return use


def refund(tenant, conversation, state: str, amount: str = "12.00") -> ActionRequest:
    arguments = {"order_id": "A-1042", "amount": amount, "reason": "r"}
    return ActionRequest.objects.create(
        tenant=tenant,
        conversation=conversation,
        customer=conversation.customer,
        tool="request_refund",
        state=state,
        arguments=arguments,
        order_key=order_key_for(tenant_id=tenant.pk, arguments=arguments),
        retry_key=uuid.uuid4().hex,
        dedupe_key=uuid.uuid4().hex,
        risk="high",
        proposed_by="intent",
    )


@pytest.fixture
def conversation(tenant):
    customer = conversation_services.customer_get_or_create_verified(
        tenant=tenant, external_id="bi-1"
    )
    return conversation_services.conversation_start(tenant=tenant, customer=customer)


def rekey() -> str:
    out = StringIO()
    call_command("blind_index_rekey", "--batch-size", "1", stdout=out)
    return out.getvalue()


def test_rotating_the_secret_key_changes_no_blind_index(tenant, ring, settings):
    before = encryption.blind_index(tenant_id=tenant.pk, purpose="order", value="A-1042")
    settings.SECRET_KEY = "rotated-" + "x" * 60
    assert encryption.blind_index(tenant_id=tenant.pk, purpose="order", value="A-1042") == before


def test_an_erased_customer_is_still_recognised_after_the_secret_key_rotates(
    api_client, ring, settings
):
    r = api_client.post(
        "/api/v1/conversations", {"customer": {"external_id": "bi-erased"}}, format="json"
    )
    assert r.status_code == 201, r.content
    assert api_client.delete("/api/v1/customers/bi-erased").status_code == 200
    settings.SECRET_KEY = "rotated-" + "y" * 60
    r = api_client.delete("/api/v1/customers/bi-erased")
    assert r.status_code == 200, r.content
    assert r.json()["already_erased"] is True


def test_a_new_key_and_a_rekey_keep_lookups_working_and_the_old_key_can_go(
    tenant, conversation, ring
):
    refund(tenant, conversation, ActionRequest.State.AWAITING_APPROVAL)
    probe = refund(tenant, conversation, ActionRequest.State.CANCELLED, amount="5.00")
    read_at = timezone.now()
    assert in_flight_for_order(probe, read_at) == Decimal("12.00")

    ring(k2=K2, k1=K1)  # the new key first; rows still hold indexes under k1
    assert (
        ActionRequest.objects.exclude(
            order_key=order_key_for(tenant_id=tenant.pk, arguments=probe.arguments)
        ).count()
        == 2
    )
    assert in_flight_for_order(probe, read_at) == Decimal("12.00")

    assert "2 re-computed" in rekey()
    assert "0 re-computed" in rekey()  # idempotent
    ring(k2=K2)  # the old key leaves
    assert in_flight_for_order(probe, read_at) == Decimal("12.00")
    stored = set(ActionRequest.objects.values_list("order_key", flat=True))
    assert stored == {order_key_for(tenant_id=tenant.pk, arguments=probe.arguments)}


def test_a_lookup_without_the_old_key_and_without_a_rekey_misses(tenant, conversation, ring):
    """Why the rekey matters: the old key dropped too early loses rows written under it."""
    refund(tenant, conversation, ActionRequest.State.AWAITING_APPROVAL)
    probe = refund(tenant, conversation, ActionRequest.State.CANCELLED, amount="5.00")
    ring(k2=K2)
    assert in_flight_for_order(probe, timezone.now()) == Decimal(0)


def test_the_dev_blind_index_keyring_is_random_private_kept_and_apart_from_the_others(
    tmp_path,
):
    first = keys.dev_blind_index_keyring(tmp_path / "a")
    path = tmp_path / "a" / keys.BLIND_INDEX_KEY_FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert keys.dev_blind_index_keyring(tmp_path / "a") == first
    assert keys.dev_blind_index_keyring(tmp_path / "b") != first
    ring = keys.parse_keyring(keys.dev_blind_index_keyring_read(tmp_path / "a"))
    (key,) = ring.values()
    assert len(key) == 32
    assert key not in keys.parse_master_keyring([keys.dev_master_keyring(tmp_path / "a")]).values()
