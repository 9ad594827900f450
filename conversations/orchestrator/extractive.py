"""Answers quoted from the passages, and the citations every answer carries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conversations.models import Message
from conversations.orchestrator import compose
from conversations.orchestrator.base import Draft
from knowledge.embeddings import embed_texts
from verification import content_words, split_sentences

EXTRACTIVE_PROMPT_VERSION = "extractive-v2"
# A second passage (another section) is quoted too when its search evidence is this close.
SECOND_PASSAGE_RATIO = 0.9


def extractive_draft(
    *,
    query: str,
    passages,
    embed: Callable[[list[str]], list[list[float]]] = embed_texts,
    context: str = "",
    avoid: str = "",
) -> Draft:
    """Quote the best passage as one contiguous window around its best sentence
    (`compose`), and a shorter one of a second passage from another section when its
    evidence is nearly as strong; each quote cited, its card showing the passage around it.

    `context` is what a follow-up resolves against (the previous question); `avoid` is the
    reply it follows (what was already said is not quoted again when something new fits)."""
    ranked = sorted(passages, key=lambda p: (-p.evidence, -p.score))
    chosen = [ranked[0]]
    if (
        len(ranked) > 1
        and ranked[1].evidence >= SECOND_PASSAGE_RATIO * ranked[0].evidence
        and (ranked[1].document_id, ranked[1].heading_path)
        != (ranked[0].document_id, ranked[0].heading_path)
    ):
        chosen.append(ranked[1])
    parts, quotes, used, said = [], {}, [], []
    for n, passage in enumerate(chosen, start=1):
        limits = (
            (compose.MIN_WORDS, compose.MAX_WORDS)
            if n == 1
            else (compose.SECOND_MIN_WORDS, compose.SECOND_MAX_WORDS)
        )
        win = compose.compose(
            query,
            passage.text,
            embed=embed,
            context=context,
            avoid=avoid,
            min_words=limits[0],
            max_words=limits[1],
        )
        if win is None or any(win.quote in q or q in win.quote for q in said):
            continue
        used.append(passage)
        said.append(win.quote)
        quotes[len(used)] = compose.surrounding(passage.text, win)
        parts.append(f"“{win.quote}” [{len(used)}]")
    if not used:  # passages without sentences: quote the first as it is
        used, parts = [ranked[0]], [f"“{compose.squash(ranked[0].text)}” [1]"]
        quotes = {1: ""}
    return Draft(
        "\n".join(parts),
        Message.Kind.EXTRACTIVE,
        used,
        quotes,
        {"prompt_version": EXTRACTIVE_PROMPT_VERSION},
    )


def quote_for(passage_text: str, sentence: str) -> str:
    """The passage sentence closest to what the answer said (what the customer can check)."""
    words = content_words(sentence)
    best = max(
        split_sentences(passage_text) or [passage_text],
        key=lambda s: len(words & content_words(s)),
    )
    return best[:400]


def _heading(passage) -> str:
    """The section path under the document title (the title is shown separately)."""
    path = list(passage.heading_path)
    if path and path[0].strip().lower() == passage.title.strip().lower():
        path = path[1:]
    return " › ".join(path)


def citations(draft: Draft) -> list[dict[str, Any]]:
    return [
        {
            "index": n,
            "chunk_id": p.chunk_id,
            "document_id": p.document_id,
            "document_version": p.document_version,
            "title": p.title,
            "heading": _heading(p),
            "quote": draft.quotes.get(n, "")[:400],
            "span": list(p.span),
            "url": p.url,
        }
        for n, p in enumerate(draft.passages, start=1)
    ]
