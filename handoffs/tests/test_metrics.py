"""The handoff queue gauges on `/metrics`."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from conversations import services as conversation_services
from handoffs import services
from handoffs.metrics import HandoffQueueCollector
from handoffs.models import Handoff


def _gauge(text: str, name: str) -> float:
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def _scrape(client, settings) -> str:
    settings.INFERENCE = {**settings.INFERENCE, "METRICS_BEARER_TOKEN": "s3cret"}
    r = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
    assert r.status_code == 200, r.content
    return r.content.decode()


@pytest.mark.django_db
def test_queue_gauges_show_depth_and_the_oldest_waiting_handoff(client, settings, tenant):
    assert _gauge(_scrape(client, settings), "supportbot_handoff_queue_depth") == 0
    assert _gauge(_scrape(client, settings), "supportbot_handoff_queue_oldest_age_seconds") == 0
    for visitor in ("v1", "v2"):
        customer = conversation_services.customer_get_or_create_visitor(
            tenant=tenant, visitor_id=visitor
        )
        conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
        services.handoff_request(conversation=conversation, reason="customer_request")
    oldest = Handoff.objects.order_by("pk").first()
    Handoff.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(minutes=7))
    text = _scrape(client, settings)
    assert _gauge(text, "supportbot_handoff_queue_depth") == 2
    assert 420 <= _gauge(text, "supportbot_handoff_queue_oldest_age_seconds") < 480
    Handoff.objects.filter(pk=oldest.pk).update(state=Handoff.State.RESOLVED)
    assert _gauge(_scrape(client, settings), "supportbot_handoff_queue_oldest_age_seconds") < 60


def test_the_collector_yields_nothing_when_the_database_is_unreachable():
    """No database access allowed here: the gauges are left out, the scrape is not a 500."""
    assert list(HandoffQueueCollector().collect()) == []
