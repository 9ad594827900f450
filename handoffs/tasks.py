"""Background jobs of handoffs (django-q2). Each takes ids and is safe to run twice."""

from django.conf import settings

from handoffs import services, summary
from handoffs.models import Handoff


def handoff_summarize_task(handoff_id: int) -> str:
    handoff = Handoff.objects.filter(pk=handoff_id).first()
    if handoff is None:
        return "gone"
    text, source = summary.summarize(handoff)
    services.handoff_set_summary(handoff_id=handoff.pk, summary=text, source=source)
    return source


def handoff_escalate_task() -> list[int]:
    return services.handoff_escalate_overdue(
        older_than_seconds=settings.HANDOFF_ESCALATE_AFTER_SECONDS
    )
