"""Keys, conditional transitions, audit and events of the action ledger."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from actions import selectors
from actions.models import SETTLED_STATES, ActionRequest
from conversations import events
from supportbot import encryption
from supportbot.errors import NotFound
from supportbot.services import Actor, audit_event_record

logger = logging.getLogger(__name__)

State = ActionRequest.State
POLICY = Actor.system("actions.policy")
EXECUTOR = Actor.system("actions.executor")


def dedupe_key_for(*, tenant_id: int, customer_id: int, tool: str, key_arguments: str) -> str:
    """sha256(tenant + customer + tool + normalized arguments): the same refund, wherever asked.

    The conversation is deliberately not part of it: the same refund asked in two
    conversations, or by a partner retrying "create conversation + message", is one refund.
    """
    raw = f"{tenant_id}|{customer_id}|{tool}|{key_arguments}"
    return hashlib.sha256(raw.encode()).hexdigest()


def retry_key_for(*, dedupe_key: str, sequence: int, generation: int) -> str:
    """The provider's Idempotency-Key for one ledger row (stable across resends of that row)."""
    return hashlib.sha256(f"{dedupe_key}|{sequence}|{generation}".encode()).hexdigest()


def audit(action: ActionRequest, event: str, actor: Actor, **data: Any) -> None:
    audit_event_record(
        tenant=action.tenant,
        actor=actor,
        action=event,
        target_type=selectors.AUDIT_TARGET,
        target_id=action.pk,
        data={"tool": action.tool, "state": action.state, **data},
    )


def announce(action: ActionRequest) -> None:
    """Tell every connection of the conversation (customer tabs, agents) the action's state."""
    events.publish_on_commit(
        action.conversation_id, events.action_updated(selectors.action_card(action))
    )


def load(action_id: int) -> ActionRequest:
    action = (
        ActionRequest.objects.select_related("tenant", "customer", "conversation", "decided_by")
        .filter(pk=action_id)
        .first()
    )
    if action is None:
        raise NotFound("No such action.")
    return action


def transition(
    action: ActionRequest,
    *,
    to: str,
    event: str,
    actor: Actor,
    data: dict[str, Any] | None = None,
    **fields: Any,
) -> ActionRequest | None:
    """Move `action` from its loaded (state, version) to `to`; None if someone moved it first."""
    now = timezone.now()
    if to in SETTLED_STATES:
        fields.setdefault("completed_at", now)
    fields = encryption.seal_fields(ActionRequest, tenant_id=action.tenant_id, fields=fields)
    with transaction.atomic():
        moved = ActionRequest.objects.filter(
            pk=action.pk, state=action.state, version=action.version
        ).update(state=to, version=F("version") + 1, updated_at=now, **fields)
        if not moved:
            return None
        fresh = load(action.pk)
        audit(fresh, event, actor, **{"from": action.state, **(data or {})})
        announce(fresh)
    return fresh


def transition_or_reload(action: ActionRequest, **kwargs: Any) -> ActionRequest:
    return transition(action, **kwargs) or load(action.pk)


def reject(action: ActionRequest, code: str, detail: str, **data: Any) -> ActionRequest:
    return transition_or_reload(
        action,
        to=State.REJECTED,
        event="action.rejected",
        actor=POLICY,
        data={"code": code, **data},
        error_code=code,
        error=detail,
    )
