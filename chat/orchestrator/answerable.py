"""Whether the help center can answer a question at all: not when the question names something
(a product, platform, tool or version, `knowledge.names`) that no document of the tenant
mentions. Such a question gets the weak-evidence answer (the closest passages as a
possibility, a question back, a person offered), never a confident quote: the search finds
passages close to its other words ("install", "run", "prompt"), and they do not answer it."""

from __future__ import annotations

from chat.orchestrator.base import Turn, db
from knowledge import selectors as knowledge
from knowledge.names import question_names


async def names_unknown(turn: Turn) -> list[str]:
    """The names in the customer's message that the tenant's documents never mention."""
    names = question_names(turn.message.text)
    if not names:
        return []
    return await db(knowledge.terms_unknown)(tenant=turn.conversation.tenant, words=names)
