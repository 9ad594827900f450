"""The order tools in a turn: a read answers now; a write becomes a card the customer
confirms (`docs/actions.md`). Text shown about an action comes from the ledger only."""

from __future__ import annotations

import logging
import re
from typing import Any

from django.conf import settings

from actions import intents as action_intents
from actions import messages as action_messages
from actions import registry as action_registry
from actions import selectors as action_selectors
from actions import services as action_services
from actions.models import ActionRequest
from chat.orchestrator.base import Draft, Emit, Outcome, Turn, TurnEvents, db, noop
from chat.orchestrator.finish import finish
from conversations import events, services
from conversations.models import Conversation, Message
from inference import gateway
from supportbot.errors import ApplicationError

logger = logging.getLogger(__name__)

ACTION_PROMPT = (
    "Decide whether the customer's message asks to look up an order or to refund an order. "
    "Answer with a tool call only. Use the order id and the amount exactly as the customer "
    "wrote them; if the customer did not state an amount, do not request a refund."
)
# "another refund", "a second refund": a deliberate refund beside one already made.
DISTINCT_REFUND = re.compile(
    r"\b(another|second|additional|extra|one more|separate)\b[^.?!]*\brefund|"
    r"\brefund\w*\b[^.?!]*\b(again|as well|too)\b",
    re.IGNORECASE,
)
CLARIFY_TEXT = {
    "which_order": (
        "Which order is this about? Please send one order number (it looks like A-1042) — "
        "I handle one order at a time."
    ),
    "which_amount": (
        "I see more than one amount ({amounts}). How much would you like refunded for order "
        "{order_id}? Please send just that amount, like $25.00."
    ),
    "ambiguous_amount": (
        "I want to get the amount exactly right: how much should I refund for order "
        "{order_id}? Please write it like $1,000.50."
    ),
    "foreign_currency": (
        'Order {order_id} is charged in {currency}, and I can\'t convert "{written}". How much '
        "would you like refunded in {currency}?"
    ),
    "not_yours": (
        "I can only help with orders on your own account. The person who placed the order can "
        "ask for a refund from theirs, or a person from our team can help."
    ),
}


async def propose(conversation: Conversation, message: Message):
    """A tool proposal (or a question back) for this message; deterministic rules first.

    The model may only fill in what the customer wrote: a model-proposed order id or amount
    that is not one of the customer's own whole tokens (as our parsers read them) is
    discarded, and `action_propose` validates everything again before anything runs. Even
    then a write only becomes a card the customer must confirm.
    """
    currency = settings.ACTIONS_CURRENCY
    proposal = action_intents.propose_from_text(message.text, currency=currency)
    if not isinstance(proposal, action_intents.Proposal):
        return proposal
    if proposal.follow_up != "ask_refund_amount":
        return proposal
    if not await db(gateway.gateway_available)():
        return proposal
    try:
        result = await gateway.complete(
            tenant_id=conversation.tenant_id,
            messages=[
                {"role": "system", "content": ACTION_PROMPT},
                {"role": "user", "content": message.text},
            ],
            max_tokens=80,
            role="small",
            affinity_key=f"conv:{conversation.pk}",
            response_format=action_registry.proposal_response_format(),
        )
        parsed = action_registry.proposal_parse(result.text)
    except (gateway.InferenceError, action_registry.ArgumentsInvalid) as exc:
        logger.info("model tool proposal unusable for message %s: %s", message.pk, exc)
        return proposal
    if parsed is None:
        return proposal
    tool, arguments = parsed
    grounded = action_intents.order_id_in_words(arguments.get("order_id"), message.text) and (
        "amount" not in arguments
        or action_intents.amount_matches_words(arguments["amount"], message.text, currency=currency)
    )
    if not grounded or (
        tool == "request_refund" and action_intents.refund_kind(message.text) != "request"
    ):
        # The tool and the message id only: the model's arguments (its `reason` above all)
        # quote the customer, and logs outlive an erasure.
        logger.info(
            "model proposal %s for message %s not grounded in the message; ignored",
            tool if action_registry.tool_get(tool) else "unknown",
            message.pk,
        )
        return proposal
    return action_intents.Proposal(tool=tool, arguments=arguments, source="model")


async def clarify(turn: Turn, asked: action_intents.Clarify) -> Outcome:
    detail = {"order_id": asked.order_id or "", "amounts": "", "currency": "", "written": ""}
    detail.update({k: v for k, v in asked.detail.items() if isinstance(v, str)})
    if "amounts" in asked.detail:
        detail["amounts"] = ", ".join(asked.detail["amounts"])
    draft = Draft(CLARIFY_TEXT[asked.code].format(**detail), Message.Kind.CLARIFY)
    draft.stats["meta"] = {"action_clarify": asked.code, "path": "tool", "path_reason": "clarify"}
    return await finish(turn, draft, stream=True)


async def run(turn: Turn, proposal: action_intents.Proposal) -> Outcome:
    """Validate and check the proposed tool: a read answers now, a write shows a card."""
    conversation, message = turn.conversation, turn.message
    await db(services.message_set_state)(message_id=message.pk, state=Message.State.CALLING_TOOL)
    try:
        action = await db(action_services.action_propose)(
            conversation=conversation,
            customer=conversation.customer,
            tool=proposal.tool,
            arguments=proposal.arguments,
            source=proposal.source,
            customer_message_id=message.pk,
            distinct=bool(DISTINCT_REFUND.search(message.text)),
        )
        fresh = action.state == "proposed"
        action = await db(action_services.action_run)(action_id=action.pk)
    except ApplicationError as exc:
        return await _rejected(turn, exc)
    card = await db(action_selectors.action_card)(action)
    text = _action_text(card["text"], action=action, fresh=fresh, turn=turn, proposal=proposal)
    if action.state == "awaiting_confirmation":
        await db(action_services.action_attach_card)(action_id=action.pk, message_id=turn.reply.pk)
        card = await db(action_selectors.action_card_get)(
            tenant=conversation.tenant, action_id=action.pk
        )
    else:
        await db(action_services.action_mark_notified)(action_id=action.pk, state=action.state)
    draft = Draft(text, Message.Kind.ACTION)
    draft.stats["tool_outcome_ref"] = str(action.pk)
    draft.stats["meta"] = {
        "action_id": action.pk,
        "action_state": action.state,
        "path": "tool",
        "path_reason": proposal.tool,
    }
    outcome = await finish(turn, draft, stream=True)
    if action.is_write:
        if card["needs_confirmation"]:
            await turn.events.publish(events.action_proposed(card))
        else:
            await turn.events.publish(events.action_updated(card))
    outcome.action = card
    return outcome


async def _rejected(turn: Turn, exc: ApplicationError) -> Outcome:
    """The reply to a proposal rejected before any call (logged and audited by the actions
    app)."""
    text = (
        "I couldn't process that request as written. Could you check the order number "
        f"and amount? ({exc.detail})"
    )
    draft = Draft(text, Message.Kind.ACTION)
    draft.stats["meta"] = {"action_rejected": exc.code, "path": "tool"}
    return await finish(turn, draft, stream=True)


def _action_text(
    text: str,
    *,
    action: ActionRequest,
    fresh: bool,
    turn: Turn,
    proposal: action_intents.Proposal,
) -> str:
    """The card's `text` with what this turn adds: a repeated refund (an open card asked for
    by an earlier message says so and where), no refund so far on a looked-up order, the
    offer to refund after a look-up."""
    if action.is_write and action.state == "awaiting_confirmation":
        if action.requested_in_message_id != turn.message.pk:
            elsewhere = action.conversation_id != turn.conversation.pk
            text = action_messages.already_open(elsewhere=elsewhere) + text
    elif action.is_write and not fresh:
        text = "You already asked for this refund. " + text
    if (
        action.tool == "check_order"
        and action.state == "succeeded"
        and action_intents.refund_kind(turn.message.text) == "question"
        and not float((action.result or {}).get("refunded_amount") or 0)
    ):
        text += " There is no refund on this order so far."
    if proposal.follow_up == "ask_refund_amount" and action.state == "succeeded":
        text += (
            " If you'd like a refund, tell me the amount and I'll prepare it for you to confirm."
        )
    return text


async def answer_pending_proposal(turn: Turn) -> Outcome | None:
    """A typed explicit "yes" / "no" right after a proposal card confirms / cancels that card;
    an acknowledgement there ("ok", "sure") is asked back, never taken as consent.

    The card may be answered already: a re-driven "yes" (its first run confirmed the card,
    then the process died) is told the card's outcome, never answered as a question.
    """
    text = turn.message.text
    affirm = action_intents.is_affirmation(text)
    decline = not affirm and action_intents.is_decline(text)
    if not (affirm or decline or action_intents.is_acknowledgement(text)):
        return None
    pending = await db(action_selectors.proposal_answered_by)(
        conversation=turn.conversation, message=turn.message
    )
    if pending is None:
        return None
    if not (affirm or decline):
        if pending.state != ActionRequest.State.AWAITING_CONFIRMATION:
            return None
        return await _ask_for_explicit_answer(turn, pending)
    try:
        card = await answer_action(
            conversation=turn.conversation,
            action_id=pending.pk,
            version=pending.version,
            confirm=affirm,
            via="typed",
            emit=turn.events.reply,
            subscribed=turn.events.subscribed,
            post_notice=False,
        )
    except ApplicationError as exc:  # expired or answered meanwhile (another tab, the API)
        card = await db(action_selectors.action_card_get)(
            tenant=turn.conversation.tenant, action_id=pending.pk
        )
        card = {**card, "text": exc.detail}
    draft = Draft(card["text"], Message.Kind.ACTION)
    draft.stats["tool_outcome_ref"] = str(pending.pk)
    draft.stats["meta"] = {
        "action_id": pending.pk,
        "action_state": card["state"],
        "path": "tool",
        "path_reason": "typed_answer",
    }
    outcome = await finish(turn, draft, stream=True)
    outcome.action = card
    return outcome


async def _ask_for_explicit_answer(turn: Turn, pending: ActionRequest) -> Outcome:
    """Ask for an explicit yes or no; this reply shows the card again (a "yes" right after
    it confirms the card)."""
    draft = Draft(action_messages.confirm_prompt(pending), Message.Kind.ACTION)
    draft.stats["tool_outcome_ref"] = str(pending.pk)
    draft.stats["meta"] = {
        "action_id": pending.pk,
        "action_state": pending.state,
        "path": "tool",
        "path_reason": "explicit_answer_needed",
    }
    outcome = await finish(turn, draft, stream=True)
    outcome.action = await db(action_selectors.action_card)(pending)
    return outcome


async def answer_action(
    *,
    conversation: Conversation,
    action_id: int,
    version: int,
    confirm: bool,
    via: str,
    emit: Emit = noop,
    subscribed: bool = False,
    post_notice: bool = True,
) -> dict[str, Any]:
    """Apply the customer's confirmation or cancellation of a proposal; return its card.

    Raise ApplicationError (Conflict for an expired, answered or stale proposal; NotFound for
    an action that is not this customer's). With `post_notice`, the outcome is also posted in
    the conversation (once per state) so every tab and the agent see it. The card's new
    state reaches the conversation's connections from the ledger (on commit); a caller
    outside the group gets it through `emit`.
    """
    card = await db(action_services.action_answer)(
        conversation=conversation,
        action_id=action_id,
        version=version,
        confirm=confirm,
        via=via,
        post_notice=post_notice,
    )
    await TurnEvents(conversation.pk, emit, subscribed=subscribed).private(
        events.action_updated(card)
    )
    return card
