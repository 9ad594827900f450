"""Writes of analytics, one concern per module:

- `topics` — the topic of a first question (nearest topic within a distance, else a new one);
- `outcomes` — deciding an idle conversation's outcome, withdrawing a resolution on a repeat
  contact, finalizing outcomes whose window closed, the sweep that does all of it;
- `rollups` — computing and upserting one tenant's daily rollups (idempotent).
"""

from analytics.services.outcomes import (
    outcome_decide,
    outcomes_finalize,
    outcomes_sweep,
)
from analytics.services.rollups import rollups_compute
from analytics.services.topics import topic_assign

__all__ = [
    "outcome_decide",
    "outcomes_finalize",
    "outcomes_sweep",
    "rollups_compute",
    "topic_assign",
]
