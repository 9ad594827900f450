"""Answers quoted from the passages, and the citations every answer carries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conversations.models import Message
from conversations.orchestrator.base import Draft
from knowledge.embeddings import embed_texts
from verification import best_sentences, content_words, join_quote, split_sentences

EXTRACTIVE_PROMPT_VERSION = "extractive-v1"


def extractive_draft(
    *, query: str, passages, embed: Callable[[list[str]], list[list[float]]] = embed_texts
) -> Draft:
    """Quote the best passage (and a second if it is nearly as strong), cited."""
    ranked = sorted(passages, key=lambda p: (-p.evidence, -p.score))
    chosen = [ranked[0]]
    if len(ranked) > 1 and ranked[1].evidence >= 0.9 * ranked[0].evidence:
        chosen.append(ranked[1])
    parts, quotes = [], {}
    for n, passage in enumerate(chosen, start=1):
        sentences = best_sentences(query, passage.text, limit=2 if n == 1 else 1, embed=embed)
        quote = join_quote(passage.text, sentences)
        quotes[n] = quote
        parts.append(f"“{quote}” [{n}]")
    text = "Here is what our help center says: " + " ".join(parts)
    return Draft(
        text, Message.Kind.EXTRACTIVE, chosen, quotes, {"prompt_version": EXTRACTIVE_PROMPT_VERSION}
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
