from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from analytics import tasks
from analytics.models import ConversationOutcome, DailyRollup
from analytics.tests.conftest import STRONG, converse
from analytics.tests.factories import CustomerFactory

pytestmark = pytest.mark.django_db


def test_both_jobs_are_scheduled_by_the_migrations():
    funcs = set(Schedule.objects.values_list("func", flat=True))
    assert {"analytics.tasks.outcomes_sweep_task", "analytics.tasks.rollups_recent_task"} <= funcs


def test_scheduled_jobs_decide_yesterdays_conversation_and_roll_up_the_recent_days(
    tenant, settings
):
    settings.ANALYTICS_ROLLUP_DAYS_BACK = 2
    started = timezone.now() - timedelta(hours=2)
    conversation = converse(
        tenant,
        CustomerFactory(tenant=tenant),
        "Where is my parcel?",
        at=started,
        replies=[{"meta": STRONG}],
    )
    assert tasks.outcomes_sweep_task()[tenant.slug] == 1
    assert ConversationOutcome.objects.get(conversation=conversation).kind == "resolved"
    assert tasks.rollups_recent_task()[tenant.slug] == 3
    day = DailyRollup.objects.get(tenant=tenant, day=started.date())
    assert (day.conversations, day.resolved) == (1, 1)
    assert tasks.outcomes_sweep_task() == {"finalized": 0}  # nothing left to decide
