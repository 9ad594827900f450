"""An answer to weak evidence: never a confident one. The closest quotes and a question back,
a refusal when nothing matched, and a person on the second weak turn. A question naming what
no document mentions (`answerable`) is answered so too, whatever the search's strength."""

from __future__ import annotations

from collections.abc import Sequence

from chat.orchestrator.base import Draft, Outcome, Turn, cpu, db
from chat.orchestrator.extractive import extractive_draft
from chat.orchestrator.finish import finish
from chat.orchestrator.handoff import hand_off
from conversations import services
from conversations.models import Message
from handoffs.models import Handoff

WEAK_MAX_QUOTES = 2
# Said for every tenant, whatever it sells or documents: no scope is named that the tenant
# did not write ("products, orders, shipping" read wrong to a software project's users).
REFUSAL_TEXT = (
    "I couldn't find anything on that in {tenant}'s help center, and I'd rather not guess. "
    "Would you like to talk to a person from our team?"
)


async def weak_answer(turn: Turn, result, passages, unknown: Sequence[str] = ()) -> Outcome:
    """Answer without confidence; `unknown`: the names in the question no document mentions
    (said to the customer, and recorded as the path's reason)."""
    conversation, message = turn.conversation, turn.message
    streak = await db(services.conversation_weak_streak_bump)(conversation_id=conversation.pk)
    weak = result.strength != "none" and bool(passages)
    if streak >= 2:
        # A person takes over, and until one answers (everyone may be offline) the customer
        # still gets the closest passages, as on the first weak turn, not the queue alone.
        return await hand_off(
            turn,
            Handoff.Reason.WEAK_EVIDENCE,
            f"no strong evidence for: {message.text[:200]}",
            closest=await _closest(turn, passages) if weak else None,
        )
    if not weak:
        draft = Draft(REFUSAL_TEXT.format(tenant=conversation.tenant.name), Message.Kind.REFUSAL)
    else:
        # Weak evidence: never a confident answer. Quote the closest passages as a
        # possibility and ask back (a second weak turn hands off, above). Two quotes, not
        # one: the weak search ranks the answering passage second as often as first (dev
        # sets 233 -> 237 of 271 key facts; out-of-scope questions still declined).
        draft = await _closest(turn, passages)
        draft.kind = Message.Kind.CLARIFY
        draft.text = (
            f"{_not_sure(unknown)} {draft.text} "
            "Does that answer it? If not, "
            "tell me a bit more, or I can connect you with a person from our team."
        )
    draft.stats["meta"] = {
        "strength": result.strength,
        "search_ms": result.timings_ms,
        "path": "weak_evidence",
        "path_reason": _reason(result, unknown),
    }
    if unknown:
        draft.stats["meta"]["unknown_names"] = list(unknown)
    return await finish(turn, draft, stream=True)


def _reason(result, unknown: Sequence[str]) -> str:
    if unknown:
        return "unknown_names"
    return "ambiguous" if result.ambiguous else result.strength


def _not_sure(unknown: Sequence[str]) -> str:
    """The hedge's opening: which names the help center never mentions, when that is why."""
    if not unknown:
        return "I'm not sure I found exactly what you're asking about."
    names = ", ".join(f'"{name}"' for name in unknown[:3])
    return f"I couldn't find {names} mentioned in our help center, so I'm not sure this answers it."


async def _closest(turn: Turn, passages) -> Draft:
    """Quotes of the passages closest to a weakly matched question, introduced as such."""
    draft = await cpu(
        extractive_draft,
        query=turn.message.text,
        passages=passages,
        embed=turn.embedder,
        max_quotes=WEAK_MAX_QUOTES,
    )
    closest = (
        "The closest thing in our help center is:"
        if len(draft.passages) == 1
        else "The closest things in our help center are:"
    )
    draft.text = f"{closest} {draft.text}"
    return draft
