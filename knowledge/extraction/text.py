"""Markdown (markdown-it): headings, paragraphs, table rows, code blocks and raw HTML.

Raw HTML in Markdown is common in FAQs (`<details><summary>Question?</summary>`, a `<br>`
inside a paragraph) and was dropped with its text: an HTML block is read by the HTML
extractor (its headings and summaries become headings one level below the Markdown
section), a `<br>` joins the lines it separates. FAQ questions written as paragraphs ("**How
do I …?**", "Q: …? A: …") head their answers as on HTML pages (`questions`).
"""

from __future__ import annotations

import lxml.html
from lxml import etree
from markdown_it import MarkdownIt

from knowledge.extraction.base import _JOIN, _SPACES, Extracted, Limits
from knowledge.extraction.html import _extract_html
from knowledge.extraction.html_tree import _below
from knowledge.extraction.questions import labels_joined, parts_as_labels, questions_as_headings

_md = MarkdownIt("commonmark").enable("table")
_BREAK_TAGS = ("<br", "<BR")


def _extract_markdown(text: str, limits: Limits) -> Extracted:
    entries: list[tuple[str | None, int]] = []  # (text, level) as html.py collects them
    heading_level = 0  # inside a heading: its level
    section = 0  # the level of the last heading
    row: list[str] | None = None  # cells of the table row being read
    for token in _md.parse(text):
        if token.type == "heading_open":
            heading_level = section = int(token.tag[1])
        elif token.type == "heading_close":
            heading_level = 0
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            entries.append((" | ".join(row or []), 0))
            row = None
        elif token.type == "inline":
            content = "".join(_inline_text(child) for child in token.children or [])
            if row is not None:
                row.append(content.replace(_JOIN, " ").strip())
            elif content.replace(_JOIN, "").strip():
                entries.append((content, heading_level))
        elif token.type in {"fence", "code_block"}:
            entries.append((token.content, -1))
        elif token.type == "html_block":
            limits.check_time()
            block = _extract_html(token.content, limits)
            for b in block.blocks:
                entries.append((b.text, _below(section) if b.level else 0))
            if not block.blocks:  # "<details><summary>…</summary>": the answer follows
                entries.extend((s, _below(section)) for s in _summaries(token.content))
    result = Extracted(limits)
    for content, level in labels_joined(parts_as_labels(questions_as_headings(entries))):
        if content is None:
            result.end_sections(level)
        else:
            result.add(content, level=max(level, 0), keep_lines=level < 0)
    return result


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
