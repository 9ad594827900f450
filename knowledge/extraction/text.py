"""Markdown (markdown-it) and plain text (underlined titles and short title lines as headings)."""

from __future__ import annotations

import re

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


# --------------------------------------------------------------------------- plain text


def _extract_plain(text: str, limits: Limits) -> Extracted:
    """Paragraphs split on blank lines; a short line underlined with === / --- or a short
    line in capitals without end punctuation counts as a heading."""
    result = Extracted(limits)
    for raw in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines = [line.rstrip() for line in raw.strip("\n").split("\n")]
        if not any(lines):
            continue
        if len(lines) >= 3 and _underline(lines[0]) and _underline(lines[2]):
            result.add(lines[1].strip(), level=1)  # a reStructuredText title, over and under
            lines = lines[3:]
        elif len(lines) >= 2 and _underline(lines[1]) and not _underline(lines[0]):
            result.add(lines[0], level=1 if lines[1].strip()[0] == "=" else 2)
            lines = lines[2:]
        elif _looks_like_heading(lines[0]) and len(lines) > 1:
            result.add(lines[0], level=2)
            lines = lines[1:]
        elif len(lines) == 1 and _looks_like_heading(lines[0]):
            result.add(lines[0], level=2)
            continue
        result.add(" ".join(lines))
    return result


def _underline(line: str) -> bool:
    """A line of one repeated punctuation mark (=== --- ~~~ ^^^ ***), as under a title."""
    return bool(re.fullmatch(r"([=\-~^*+#\"'`:._])\1{2,}", line.strip()))


def _looks_like_heading(line: str) -> bool:
    line = line.strip()
    if not line or len(line) > 80 or line[-1] in ".,;:!?":
        return False
    letters = [c for c in line if c.isalpha()]
    return bool(letters) and (line.isupper() or bool(re.match(r"^#{1,6}\s", line)))
