"""Writes of conversation state. Events go out on commit, so nothing is announced that did not
commit. The database decides races: unique constraints and version columns.

One concern per module: customers, conversations (owner, counters, summary), messages,
replies (the one bot reply per customer message)."""

from __future__ import annotations

from conversations.services.conversations import (
    SUMMARY_EVERY,
    SUMMARY_KEEP_RECENT,
    conversation_count_model_failure,
    conversation_set_owner,
    conversation_set_summary,
    conversation_start,
    conversation_summary_due,
    conversation_summary_rebuild,
    conversation_weak_streak_bump,
    conversation_weak_streak_reset,
)
from conversations.services.customers import (
    customer_get_or_create_verified,
    customer_get_or_create_visitor,
)
from conversations.services.messages import (
    MAX_MESSAGE_CHARS,
    feedback_set,
    message_announce,
    message_as_event,
    message_post,
    message_receive,
    message_set_state,
)
from conversations.services.replies import (
    conversation_while_bot_owns,
    message_redrive_count,
    reply_fail,
    reply_finalize,
    reply_reserve,
    reply_reserve_or_take_over,
    reply_withdraw,
)

__all__ = [
    "message_announce",
    "MAX_MESSAGE_CHARS",
    "SUMMARY_EVERY",
    "SUMMARY_KEEP_RECENT",
    "conversation_count_model_failure",
    "conversation_set_owner",
    "conversation_set_summary",
    "conversation_start",
    "conversation_summary_due",
    "conversation_summary_rebuild",
    "conversation_weak_streak_bump",
    "conversation_weak_streak_reset",
    "customer_get_or_create_verified",
    "customer_get_or_create_visitor",
    "feedback_set",
    "message_as_event",
    "message_post",
    "message_receive",
    "message_set_state",
    "conversation_while_bot_owns",
    "message_redrive_count",
    "reply_fail",
    "reply_finalize",
    "reply_reserve",
    "reply_reserve_or_take_over",
    "reply_withdraw",
]
