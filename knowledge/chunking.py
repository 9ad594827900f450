"""Heading-aware chunking: passages of at most ~200 tokens with ~15% overlap inside a section.

A chunk never spans two sections, so its heading path is exact; long paragraphs are split at
sentence boundaries (at word boundaries for run-on sentences). Spans point into the extracted
text. Tokens are counted as words and punctuation marks, which tracks MiniLM's word pieces
closely for help-center prose (a test checks chunks stay under its 256-piece window).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowledge.extraction import Extracted

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
# A sentence ends at ".", "!" or "?" (and closing quotes or brackets) followed by whitespace
# or the end of the block; a "." inside a token (core.editor, HTTP/1.1, *.c, 2.39) ends none.
# The lookbehind starts a match at the first mark of a run only, which keeps the scan linear.
SENTENCE_END_RE = re.compile(r"(?<![.!?])[.!?]++[\"')\]]*+(?=\s|\Z)")
DEFAULT_MAX_TOKENS = 200
DEFAULT_OVERLAP = 0.15


@dataclass(frozen=True)
class ChunkDraft:
    text: str
    heading_path: list[str]
    start: int
    end: int


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    tokens: int


def count_tokens(text: str) -> int:
    return len(TOKEN_RE.findall(text))


def chunk_document(
    extracted: Extracted,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap: float = DEFAULT_OVERLAP,
) -> list[ChunkDraft]:
    """Split extracted blocks into chunks; each keeps the heading path it sits under."""
    text = extracted.text
    chunks: list[ChunkDraft] = []
    headings: list[tuple[int, str]] = []
    units: list[_Unit] = []
    unit_tokens = 0  # tokens in `units`, kept as a running sum so chunking stays linear
    overlap_budget = int(max_tokens * overlap)

    def emit(carry: bool) -> None:
        nonlocal unit_tokens
        if not units:
            return
        start, end = units[0].start, units[-1].end
        chunks.append(
            ChunkDraft(
                text=text[start:end],
                heading_path=[h for _, h in headings],
                start=start,
                end=end,
            )
        )
        kept: list[_Unit] = []
        if carry:
            budget = overlap_budget
            for unit in reversed(units[1:]):  # never carry the whole chunk
                if unit.tokens > budget:
                    break
                kept.append(unit)
                budget -= unit.tokens
        units[:] = kept[::-1]
        unit_tokens = sum(u.tokens for u in units)

    for block in extracted.blocks:
        if block.level:
            emit(carry=False)
            headings[:] = [h for h in headings if h[0] < block.level]
            if block.text:  # an empty heading only ends the sections of its level
                headings.append((block.level, block.text))
            continue
        for unit in _units(text, block.start, block.end, max_tokens):
            if units and unit_tokens + unit.tokens > max_tokens:
                emit(carry=True)
            units.append(unit)
            unit_tokens += unit.tokens
    emit(carry=False)
    return chunks


def _units(text: str, start: int, end: int, max_tokens: int) -> list[_Unit]:
    """The block as one unit if it fits, else its sentences (run-ons cut into word windows)."""
    tokens = count_tokens(text[start:end])
    if tokens <= max_tokens:
        return [_Unit(start, end, tokens)]
    units = []
    for s, e in _sentences(text, start, end):
        n = count_tokens(text[s:e])
        if n <= max_tokens:
            units.append(_Unit(s, e, n))
            continue
        words = list(re.finditer(r"\S+", text[s:e]))
        step = max(1, max_tokens // 2)
        for i in range(0, len(words), step):
            window = words[i : i + step]
            ws, we = s + window[0].start(), s + window[-1].end()
            units.append(_Unit(ws, we, count_tokens(text[ws:we])))
    return units


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of the sentences of text[start:end], without the whitespace between them."""
    spans = []
    cursor = start
    for match in SENTENCE_END_RE.finditer(text, start, end):
        spans.append((cursor, match.end()))
        cursor = match.end()
    spans.append((cursor, end))
    trimmed = []
    for s, e in spans:
        piece = text[s:e]
        s, e = s + len(piece) - len(piece.lstrip()), s + len(piece.rstrip())
        if s < e:
            trimmed.append((s, e))
    return trimmed
