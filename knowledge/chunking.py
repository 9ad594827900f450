"""Heading-aware chunking: passages of at most ~200 tokens with ~15% overlap inside a section.

A chunk never spans two sections, so its heading path is exact; long paragraphs are split at
sentence boundaries (at word boundaries for run-on sentences). Spans point into the extracted
text. Tokens are counted as words and punctuation marks, which tracks MiniLM's word pieces
closely for help-center prose (a test checks chunks stay under its 256-piece window).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from knowledge.extraction import Block, Extracted

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
    chunker = _Chunker(text, max_tokens=max_tokens, overlap_budget=int(max_tokens * overlap))
    for block in extracted.blocks:
        if block.level:
            chunker.heading(block)
            continue
        for unit in _units(text, block.start, block.end, max_tokens):
            chunker.add(unit)
    chunker.emit(carry=False)
    return chunker.chunks


@dataclass
class _Chunker:
    """Units of text gathered into chunks under the current heading path."""

    text: str
    max_tokens: int
    overlap_budget: int  # tokens of a chunk's last units carried into the next one
    chunks: list[ChunkDraft] = field(default_factory=list)
    headings: list[tuple[int, str]] = field(default_factory=list)  # (level, text)
    units: list[_Unit] = field(default_factory=list)  # the chunk being gathered
    unit_tokens: int = 0  # tokens in `units`, kept as a running sum so chunking stays linear

    def heading(self, block: Block) -> None:
        """End the chunk (nothing carried over) and enter the heading's section; an empty
        heading only ends the sections of its level."""
        self.emit(carry=False)
        self.headings = [h for h in self.headings if h[0] < block.level]
        if block.text:
            self.headings.append((block.level, block.text))

    def add(self, unit: _Unit) -> None:
        """Add a unit, first ending the chunk when the unit would take it past max_tokens."""
        if self.units and self.unit_tokens + unit.tokens > self.max_tokens:
            self.emit(carry=True)
        self.units.append(unit)
        self.unit_tokens += unit.tokens

    def emit(self, *, carry: bool) -> None:
        """End the chunk being gathered; with `carry` its last units (`_overlap`) open the
        next one."""
        if not self.units:
            return
        start, end = self.units[0].start, self.units[-1].end
        self.chunks.append(
            ChunkDraft(
                text=self.text[start:end],
                heading_path=[h for _, h in self.headings],
                start=start,
                end=end,
            )
        )
        self.units = self._overlap() if carry else []
        self.unit_tokens = sum(u.tokens for u in self.units)

    def _overlap(self) -> list[_Unit]:
        """The chunk's last units that fit in the overlap budget, never the whole chunk."""
        kept: list[_Unit] = []
        budget = self.overlap_budget
        for unit in reversed(self.units[1:]):
            if unit.tokens > budget:
                break
            kept.append(unit)
            budget -= unit.tokens
        return kept[::-1]


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
