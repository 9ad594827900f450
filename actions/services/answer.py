"""The customer's answer to a proposal card, from any channel (chat socket, partner REST)."""

from __future__ import annotations

from typing import Any

from actions import selectors
from actions.services.confirm import action_cancel, action_confirm
from actions.services.sweep import action_mark_notified, notify_customer
from conversations import selectors as conversation_selectors
from conversations.models import Conversation


def action_answer(
    *,
    conversation: Conversation,
    action_id: int,
    version: int,
    confirm: bool,
    via: str,
    post_notice: bool = True,
) -> dict[str, Any]:
    """Apply the customer's confirmation or cancellation of a proposal; return its card.

    Raise ApplicationError (Conflict for an expired, answered or stale proposal; NotFound for
    an action that is not this customer's). With `post_notice`, the outcome is also posted in
    the conversation (once per state) so every tab and the agent see it; without, the state is
    only marked as told. The card's new state reaches the conversation's connections from the
    ledger on commit.
    """
    customer = conversation_selectors.customer_of(conversation=conversation)
    if confirm:
        action = action_confirm(
            action_id=action_id, customer=customer, expected_version=version, via=via
        )
    else:
        action = action_cancel(action_id=action_id, customer=customer, expected_version=version)
    if post_notice:
        notify_customer(action=action)
    else:
        action_mark_notified(action_id=action.pk, state=action.state)
    return selectors.action_card(action)
