"""Reads of analytics, one concern per module:

- `facts` — what a conversation's outcome is decided from; which conversations are idle;
  the first question's text (unsealed through the message model, never copied);
- `figures` — one tenant's daily figures over a range of days, aggregated in SQL;
- `rollups` — the stored daily rollups.
"""

from analytics.selectors.facts import (
    conversation_facts,
    conversations_idle,
    first_questions,
    tenants_active,
)
from analytics.selectors.figures import DayFigures, daily_figures
from analytics.selectors.rollups import rollup_list

__all__ = [
    "DayFigures",
    "conversation_facts",
    "conversations_idle",
    "daily_figures",
    "first_questions",
    "rollup_list",
    "tenants_active",
]
