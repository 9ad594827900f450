"""Handoff summaries: what the agent needs before reading the transcript.

The small model writes a draft through the inference gateway; every sentence of it must be
supported by the transcript (the same verifier as answers), else the extractive summary is
used. Originals stay; the summary can be rebuilt at any time.
"""

from __future__ import annotations

import logging

from conversations.models import Message
from handoffs.models import Handoff
from inference import gateway
from supportbot import eventloop
from verification import PassageVerifier, split_sentences, strip_citations

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "Summarize this customer support conversation for a human agent in at most three short "
    "sentences: what the customer wants, what the assistant answered, and what is still open. "
    "Use only facts stated in the transcript."
)


def _transcript(handoff: Handoff) -> list[Message]:
    return list(
        Message.objects.filter(conversation_id=handoff.conversation_id)
        .exclude(text="")
        .order_by("id")
    )


def extractive_summary(handoff: Handoff, messages: list[Message]) -> str:
    """A summary assembled from the records themselves: never wrong, sometimes long."""
    customer = [m for m in messages if m.role == Message.Role.CUSTOMER]
    answers = [
        m
        for m in messages
        if m.role == Message.Role.BOT and m.kind in (Message.Kind.ANSWER, Message.Kind.EXTRACTIVE)
    ]
    lines = [
        f"Reason: {handoff.get_reason_display()}"
        + (f" ({handoff.reason_detail})" if handoff.reason_detail else "")
        + "."
    ]
    if customer:
        lines.append(f"Customer first asked: “{customer[0].text[:300]}”.")
        if len(customer) > 1:
            lines.append(f"Latest customer message: “{customer[-1].text[:300]}”.")
    for answer in answers[-2:]:
        sources = ", ".join(
            dict.fromkeys(f"{c['title']} ({c.get('url') or 'no link'})" for c in answer.citations)
        )
        lines.append(
            f"Bot answered: “{strip_citations(answer.text)[:300]}”"
            + (f" — sources: {sources}." if sources else ".")
        )
    actions = [m for m in messages if m.kind == Message.Kind.ACTION]
    for action in actions[-3:]:
        lines.append(f"Action: {action.text[:200]}")
    if not answers:
        lines.append("The bot gave no knowledge answer.")
    return "\n".join(lines)


def _model_summary(handoff: Handoff, messages: list[Message]) -> str | None:
    transcript = "\n".join(
        f"{m.role.capitalize()}: {strip_citations(m.text)[:600]}" for m in messages[-20:]
    )
    try:
        result = eventloop.run(
            gateway.complete(
                tenant_id=handoff.tenant_id,
                messages=[
                    {"role": "system", "content": SUMMARY_PROMPT},
                    {"role": "user", "content": transcript},
                ],
                max_tokens=120,
                role="small",
                affinity_key=f"conv:{handoff.conversation_id}",
            )
        )
    except gateway.InferenceError as exc:
        logger.info("summary model unavailable for handoff %s: %s", handoff.pk, exc)
        return None
    sentences = split_sentences(result.text)
    if not sentences:
        return None
    verifier = PassageVerifier([strip_citations(m.text) for m in messages if m.text])
    checks = verifier.check_many(sentences)
    if not all(c.supported for c in checks):
        logger.info(
            "summary for handoff %s rejected: %s",
            handoff.pk,
            [c.reasons for c in checks if not c.supported],
        )
        return None
    return " ".join(c.sentence for c in checks)


def summarize(handoff: Handoff) -> tuple[str, str]:
    """Return (summary, source) where source is "model" or "extractive"."""
    messages = _transcript(handoff)
    extractive = extractive_summary(handoff, messages)
    if gateway.gateway_available():
        drafted = _model_summary(handoff, messages)
        if drafted:
            reason_line = extractive.splitlines()[0]
            return f"{reason_line}\n{drafted}", "model"
    return extractive, "extractive"
