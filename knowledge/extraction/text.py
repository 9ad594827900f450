"""Markdown (markdown-it): headings, paragraphs, table rows and code blocks."""

from __future__ import annotations

from markdown_it import MarkdownIt

from knowledge.extraction.base import Extracted, Limits

_md = MarkdownIt("commonmark").enable("table")


def _extract_markdown(text: str, limits: Limits) -> Extracted:
    result = Extracted(limits)
    heading_level = 0
    row: list[str] | None = None  # cells of the table row being read
    for token in _md.parse(text):
        if token.type == "heading_open":
            heading_level = int(token.tag[1])
        elif token.type == "heading_close":
            heading_level = 0
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            result.add(" | ".join(row or []))
            row = None
        elif token.type == "inline":
            content = "".join(
                child.content if child.type != "softbreak" else " "
                for child in token.children or []
                if child.type in {"text", "code_inline", "softbreak"}
            )
            if row is not None:
                row.append(content.strip())
            else:
                result.add(content, level=heading_level)
        elif token.type in {"fence", "code_block"}:
            result.add(token.content, keep_lines=True)
    return result
