"""Background jobs of conversations (django-q2). Each takes ids and is safe to run twice."""

from __future__ import annotations

import logging

from conversations import customer_data, services

logger = logging.getLogger(__name__)


def conversation_summarize_task(conversation_id: int) -> int:
    """Rebuild the stored summary of older messages; return its length."""
    return len(services.conversation_summary_rebuild(conversation_id=conversation_id))


def retention_sweep_task() -> dict[str, dict[str, int]]:
    """Erase conversations past their tenant's retention (hourly); return counts by tenant."""
    return customer_data.conversations_erase_expired()
