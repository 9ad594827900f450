"""The topic of a first question: the nearest topic of its tenant, or a new one."""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction
from pgvector.django import CosineDistance

from analytics.models import Topic
from conversations.models import Message

# pg_advisory_xact_lock's first key: topics of one tenant are created one at a time.
TOPIC_LOCK_CLASS = 33_01


@transaction.atomic
def topic_assign(*, tenant_id: int, question: Message, embedding: list[float]) -> Topic:
    """Return the tenant's topic nearest to `embedding` within ANALYTICS_TOPIC_MAX_DISTANCE;
    else open a new topic represented by `question` (by id: its text stays on the message).

    A lock per tenant keeps two sweeps from opening the same new topic twice.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [TOPIC_LOCK_CLASS, tenant_id])
    nearest = (
        Topic.objects.filter(tenant_id=tenant_id)
        .annotate(distance=CosineDistance("embedding", embedding))
        .order_by("distance", "pk")
        .first()
    )
    if nearest is not None and nearest.distance <= settings.ANALYTICS_TOPIC_MAX_DISTANCE:
        return nearest
    return Topic.objects.create(
        tenant_id=tenant_id, embedding=embedding, representative_message=question
    )
