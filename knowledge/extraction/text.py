"""Markdown (markdown-it): headings, paragraphs, table rows, code blocks and raw HTML.

Raw HTML in Markdown is common in FAQs (`<details><summary>Question?</summary>`, a `<br>`
inside a paragraph) and was dropped with its text: an HTML block is read by the HTML
extractor (its headings and summaries become headings one level below the Markdown
section), a `<br>` joins the lines it separates. FAQ questions written as paragraphs ("**How
do I …?**", "Q: …? A: …") head their answers as on HTML pages (`questions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import lxml.html
from lxml import etree
from markdown_it import MarkdownIt
from markdown_it.token import Token

from knowledge.extraction.base import _JOIN, _SPACES, Extracted, Limits
from knowledge.extraction.html import _extract_html
from knowledge.extraction.html_tree import _below
from knowledge.extraction.questions import labels_joined, parts_as_labels, questions_as_headings

_md = MarkdownIt("commonmark").enable("table")
_BREAK_TAGS = ("<br", "<BR")


def _extract_markdown(text: str, limits: Limits) -> Extracted:
    """Headings, paragraphs, table rows, code blocks and raw HTML in source order, each
    token read by its type's handler in `_TOKEN_HANDLERS`; FAQ questions, part headings and
    labels read as on HTML pages (`questions`)."""
    read = _Read(limits)
    for token in _md.parse(text):
        if (handler := _TOKEN_HANDLERS.get(token.type)) is not None:
            handler(read, token)
    result = Extracted(limits)
    for content, level in labels_joined(parts_as_labels(questions_as_headings(read.entries))):
        if content is None:
            result.end_sections(level)
        else:
            result.add(content, level=max(level, 0), keep_lines=level < 0)
    return result


@dataclass
class _Read:
    """The state of reading a token stream, shared by the handlers."""

    limits: Limits
    # (text, level) as html.py collects them: level -1 is code, (None, level) ends sections
    entries: list[tuple[str | None, int]] = field(default_factory=list)
    heading_level: int = 0  # inside a heading: its level
    section: int = 0  # the level of the last heading
    row: list[str] | None = None  # cells of the table row being read


def _heading_open(read: _Read, token: Token) -> None:
    read.heading_level = read.section = int(token.tag[1])


def _heading_close(read: _Read, token: Token) -> None:
    read.heading_level = 0


def _row_open(read: _Read, token: Token) -> None:
    read.row = []


def _row_close(read: _Read, token: Token) -> None:
    read.entries.append((" | ".join(read.row or []), 0))
    read.row = None


def _inline_read(read: _Read, token: Token) -> None:
    """Inline text: a table cell, or a paragraph or heading with visible text."""
    content = "".join(_inline_text(child) for child in token.children or [])
    if read.row is not None:
        read.row.append(content.replace(_JOIN, " ").strip())
    elif content.replace(_JOIN, "").strip():
        read.entries.append((content, read.heading_level))


def _code_read(read: _Read, token: Token) -> None:
    read.entries.append((token.content, -1))


def _html_read(read: _Read, token: Token) -> None:
    """An HTML block, read by the HTML extractor (its headings one level below the
    section); a block of no text of its own may open <details>: its summaries head."""
    read.limits.check_time()
    block = _extract_html(token.content, read.limits)
    for b in block.blocks:
        read.entries.append((b.text, _below(read.section) if b.level else 0))
    if not block.blocks:  # "<details><summary>…</summary>": the answer follows
        read.entries.extend((s, _below(read.section)) for s in _summaries(token.content))


_TOKEN_HANDLERS = {
    "heading_open": _heading_open,
    "heading_close": _heading_close,
    "tr_open": _row_open,
    "tr_close": _row_close,
    "inline": _inline_read,
    "fence": _code_read,
    "code_block": _code_read,
    "html_block": _html_read,
}


def _summaries(html: str) -> list[str]:
    """The text of each <summary> in an HTML fragment (the rest of its <details> is Markdown
    in the blocks that follow)."""
    try:
        root = lxml.html.fragment_fromstring(html, create_parent="div")
    except (etree.ParserError, ValueError):
        return []
    texts = (_SPACES.sub(" ", "".join(s.itertext())).strip() for s in root.iter("summary"))
    return [t for t in texts if t]


def _inline_text(child) -> str:
    if child.type in {"text", "code_inline"}:
        return child.content
    if child.type == "softbreak":
        return " "
    if child.type in {"hardbreak"} or (
        child.type == "html_inline" and child.content.startswith(_BREAK_TAGS)
    ):
        return _JOIN
    return ""
