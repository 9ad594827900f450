"""Analytics: conversation outcomes, topics and the daily rollups' prices."""

from decimal import Decimal

from config.env import env

# A resolution stands only if the customer does not come back on the same topic this soon
# after the conversation ended; the outcome is final once the window has closed.
ANALYTICS_REPEAT_CONTACT_DAYS = env.int("ANALYTICS_REPEAT_CONTACT_DAYS", default=7)
# A first question joins the nearest topic of its tenant when its cosine distance to the
# topic's vector is at most this (MiniLM: paraphrases sit below ~0.35, other subjects above).
ANALYTICS_TOPIC_MAX_DISTANCE = env.float("ANALYTICS_TOPIC_MAX_DISTANCE", default=0.35)
# Conversations decided per batch of the outcome sweep (one transaction each).
ANALYTICS_OUTCOME_BATCH = env.int("ANALYTICS_OUTCOME_BATCH", default=200)
# The scheduled rollup recomputes this many days back (outcomes change until final).
ANALYTICS_ROLLUP_DAYS_BACK = env.int("ANALYTICS_ROLLUP_DAYS_BACK", default=9)
# Cost of a conversation: model tokens at these prices (currency units per 1,000 tokens) plus
# the CPU of each bot turn (search, verification; what a turn costs besides the model).
ANALYTICS_PROMPT_PRICE_PER_1K = Decimal(env.str("ANALYTICS_PROMPT_PRICE_PER_1K", default="0.0005"))
ANALYTICS_COMPLETION_PRICE_PER_1K = Decimal(
    env.str("ANALYTICS_COMPLETION_PRICE_PER_1K", default="0.0015")
)
ANALYTICS_CPU_COST_PER_TURN = Decimal(env.str("ANALYTICS_CPU_COST_PER_TURN", default="0.0002"))
