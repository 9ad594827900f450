"""Console queue events: one envelope per change, sent once the write commits."""

import ast
import asyncio
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from conversations import services as conversation_services
from handoffs import events as queue_events
from handoffs import services
from supportbot.tests.factories import MembershipFactory


@pytest.fixture
def console_messages(tenant):
    """What a console of the tenant hears: call it after the actions to get every group
    message sent to the tenant's queue group since the fixture started, in order."""
    layer = get_channel_layer()
    group = queue_events.queue_group(tenant.pk)
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group, channel)

    async def drain() -> list[dict]:
        heard = []
        while True:  # one event loop for every receive: the layer's buffer is bound to it
            try:
                heard.append(await asyncio.wait_for(layer.receive(channel), 1.0))
            except TimeoutError:
                return heard

    yield lambda: async_to_sync(drain)()
    async_to_sync(layer.group_discard)(group, channel)


@pytest.fixture
def conversation(tenant):
    customer = conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v")
    return conversation_services.conversation_start(tenant=tenant, customer=customer)


def test_handoff_changes_reach_the_tenants_consoles_once_committed(
    tenant, conversation, console_messages, django_capture_on_commit_callbacks
):
    agent = MembershipFactory(tenant=tenant).user
    with django_capture_on_commit_callbacks(execute=True):
        handoff, _ = services.handoff_request(conversation=conversation, reason="high_risk")
    with django_capture_on_commit_callbacks(execute=True):
        services.handoff_claim(
            tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, expected_version=1
        )
        services.note_add(
            tenant_id=tenant.pk, conversation_id=conversation.pk, agent=agent, text="vip"
        )
    assert console_messages() == [
        {"type": "handoff.changed", "event": "queued", "handoff_id": handoff.pk},
        {"type": "handoff.changed", "event": "assigned", "handoff_id": handoff.pk},
        {
            "type": "handoff.changed",
            "event": "note",
            "handoff_id": None,
            "conversation_id": conversation.pk,
        },
    ]


def test_a_rolled_back_change_tells_no_console(
    tenant, conversation, console_messages, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as sent:
        try:
            with transaction.atomic():
                services.handoff_request(conversation=conversation, reason="high_risk")
                raise RuntimeError("abort")
        except RuntimeError:
            pass
    assert sent == []
    assert console_messages() == []


def test_no_queue_event_envelope_is_built_outside_handoffs_events():
    """Every console queue event comes from a builder in handoffs/events.py."""
    root = Path(settings.BASE_DIR)
    found = []
    packages = [p.parent for p in root.glob("*/__init__.py")]
    for path in (f for package in packages for f in package.rglob("*.py")):
        rel = path.relative_to(root)
        if "tests" in rel.parts:
            continue
        if rel == Path("handoffs/events.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(rel))):
            if isinstance(node, ast.Constant) and node.value in (
                queue_events.GROUP_MESSAGE_TYPE,
                queue_events.CLIENT_EVENT_TYPE,
            ):
                found.append(f"{rel}:{node.lineno}")
    assert found == []
