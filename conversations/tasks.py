"""Background jobs of conversations (django-q2). Each takes ids and is safe to run twice."""

from conversations import services


def conversation_summarize_task(conversation_id: int) -> int:
    """Rebuild the stored summary of older messages; return its length."""
    return len(services.conversation_summary_rebuild(conversation_id=conversation_id))
