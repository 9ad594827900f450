"""Customer notices for outcomes reached outside their request, and the sweeper."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from actions.messages import customer_text
from actions.models import SETTLED_STATES, ActionRequest
from actions.services.execute import action_run
from actions.services.ledger import State
from actions.services.propose import expire
from conversations import services as conversation_services
from conversations.models import Message

logger = logging.getLogger(__name__)


def action_mark_notified(*, action_id: int, state: str) -> None:
    """Record that the customer was already told about `state` (by the bot's own reply)."""
    ActionRequest.objects.filter(pk=action_id, state=state).update(notified_state=state)


# States the customer is told about when reached outside their own message.
NOTICE_STATES = (*SETTLED_STATES, "unknown", "awaiting_approval", "approved")


def action_attach_card(*, action_id: int, message_id: int) -> None:
    """Record the bot reply that shows the proposal card (a typed "yes" answers that card)."""
    ActionRequest.objects.filter(pk=action_id).update(
        proposal_message_id=message_id, notified_state=State.AWAITING_CONFIRMATION
    )


def notify_customer(*, action: ActionRequest) -> Message | None:
    """Tell the customer an outcome reached outside their request (confirmation, approval,
    sweeper). Posted once per state (`notified_state`), with text built from the ledger only.
    """
    if action.state not in NOTICE_STATES:
        return None
    with transaction.atomic():
        marked = (
            ActionRequest.objects.filter(pk=action.pk)
            .exclude(notified_state=action.state)
            .update(notified_state=action.state)
        )
        if not marked:
            return None
        return conversation_services.message_post(
            conversation=action.conversation,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.ACTION,
            text=customer_text(action),
            meta={"action_id": action.pk, "state": action.state},
        )


def actions_sweep(*, limit: int = 50) -> list[int]:
    """Expire unanswered proposals; settle `unknown`, stuck `executing` and unstarted
    `approved` rows by lookup (or by executing them). Safe to run twice or in parallel."""
    now = timezone.now()
    cfg = settings.ACTIONS
    expired = ActionRequest.objects.filter(
        state=State.AWAITING_CONFIRMATION, expires_at__lt=now
    ).select_related("tenant", "customer", "conversation")[:limit]
    for action in expired:
        expire(action)
    stuck = (
        Q(state=State.UNKNOWN)
        | Q(
            state=State.EXECUTING,
            executing_since__lt=now - timedelta(seconds=cfg["STALE_EXECUTING_S"]),
        )
        | Q(state=State.APPROVED, updated_at__lt=now - timedelta(seconds=cfg["STALE_APPROVED_S"]))
    )
    ids = list(
        ActionRequest.objects.filter(stuck)
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )
    for action_id in ids:
        try:
            action = action_run(action_id=action_id)
            if action.is_settled:
                notify_customer(action=action)
        except Exception:  # one bad row must not stop the sweep
            logger.exception("sweeping action %s failed", action_id)
    return ids


def action_show_card(*, action: ActionRequest) -> Message:
    """Post a proposal card in the customer's chat (an agent's proposal; the bot's own cards
    are its replies). A typed "yes" right after it confirms it."""
    with transaction.atomic():
        message = conversation_services.message_post(
            conversation=action.conversation,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.ACTION,
            text=customer_text(action),
            meta={"action_id": action.pk, "state": action.state},
        )
        action_attach_card(action_id=action.pk, message_id=message.pk)
    return message
