"""Passages that say something the better-ranked ones have not said already.

A tenant's documents often repeat each other: a getting-started guide copies sections of the
user guide, a release's manual repeats the last one. The same section then comes back once per
document, and a search's few passages, the ones a reply is composed from, are spent on one
text (KeePassXC's two guides share 72% of their text: 49 of 60 questions had a repeated
passage among their eight, 100 of 480 passages). A passage is a repeat when most of its word
trigrams are in a passage ranked above it; one that only overlaps its neighbour in the same
document (chunks share a few sentences at their edges) is not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, TypeVar

# Share of a passage's word trigrams (of the smaller of the two) that makes it a repeat: a
# section repeated with other figure numbers or cut at another place stays above it, two
# passages that share a sentence or a list stay below.
REPEAT_SHARE = 0.8
_WORDS = re.compile(r"[^\W_]+")


class _Ranked(Protocol):
    document_id: int
    span: tuple[int, int]
    text: str


P = TypeVar("P", bound=_Ranked)


@lru_cache(maxsize=2048)
def _trigrams(text: str) -> frozenset[int]:
    """The text's word trigrams, each as its hash (sets of ints intersect several times
    faster than sets of tuples, whose hashes are not kept). Cached: a tenant's passages recur
    across searches (~10 KB a passage)."""
    words = _WORDS.findall(text.lower())
    if len(words) < 3:
        return frozenset([hash(tuple(words))]) if words else frozenset()
    return frozenset(hash(gram) for gram in zip(words, words[1:], words[2:], strict=False))


def _neighbours(a: _Ranked, b: _Ranked) -> bool:
    """Chunks of one document whose spans overlap or touch (the chunker's edge overlap)."""
    if a.document_id != b.document_id:
        return False
    return a.span[0] <= b.span[1] and b.span[0] <= a.span[1]


def passages_distinct(passages: Sequence[P]) -> list[P]:
    """Return `passages` in their order without the repeats of a passage kept before them."""
    kept: list[tuple[P, frozenset]] = []
    for passage in passages:
        grams = _trigrams(passage.text)
        repeat = any(
            grams
            and other
            and not _neighbours(passage, earlier)
            and len(grams & other) >= REPEAT_SHARE * min(len(grams), len(other))
            for earlier, other in kept
        )
        if not repeat:
            kept.append((passage, grams))
    return [p for p, _ in kept]
