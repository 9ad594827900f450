"""PDF: the text layer read by pypdf, headings recognised by font size."""

from __future__ import annotations

import io
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from pypdf import PdfReader, apply_configuration
from pypdf.errors import LimitReachedError, PyPdfError

from knowledge.extraction.base import (
    _JOIN,
    Extracted,
    ExtractionError,
    Limits,
)
from knowledge.extraction.pdf_layout import PAGE_BREAK, layout_lines, unspaced

_PDF_OUTPUT_LIMITS = (
    "maximum_declared_stream_length",
    "array_based_stream_maximum_output_length",
    "jbig2_maximum_output_length",
    "lzw_maximum_output_length",
    "run_length_maximum_output_length",
    "zlib_maximum_output_length",
    "brotli_maximum_output_length",
    "image_maximum_buffer_size",
)


def pdf_limits(limits: Limits) -> dict[str, int]:
    """pypdf's resource limits, tightened to `limits.max_stream_bytes` per stream."""
    stream = limits.max_stream_bytes
    return dict.fromkeys(_PDF_OUTPUT_LIMITS, stream) | {
        "stream_decoding_work_maximum_length": 4 * stream
    }


def _extract_pdf(data: bytes, limits: Limits) -> Extracted:
    """Read the text layer under pypdf's resource limits (tightened), page by page.

    Any failure inside pypdf — a decompression bomb (LimitReachedError), a malformed file, or
    pypdf's own bugs on hostile input — becomes an ExtractionError with the reason."""
    try:
        with apply_configuration(**pdf_limits(limits)):
            lines = _pdf_lines(data, limits)
        if unspaced(lines):
            lines = layout_lines(data, limits)
    except ExtractionError:
        raise
    except LimitReachedError as exc:
        raise ExtractionError(
            f"The PDF expands beyond the safe limits (a stream may decompress to at most "
            f"{limits.max_stream_bytes // (1024 * 1024)} MiB): {_reason(exc)}."
        ) from exc
    except PyPdfError as exc:
        raise ExtractionError(f"The PDF cannot be read: {_reason(exc)}.") from exc
    except RecursionError as exc:
        raise ExtractionError("The PDF cannot be read: its objects nest too deeply.") from exc
    except Exception as exc:  # pypdf raises assorted errors on hostile files
        raise ExtractionError(
            f"The PDF cannot be read: {type(exc).__name__}: {_reason(exc)}."
        ) from exc
    return _pdf_blocks(_without_page_furniture(lines), limits)


def _reason(exc: Exception) -> str:
    return str(exc)[:300].strip().rstrip(".") or type(exc).__name__


def _pdf_lines(data: bytes, limits: Limits) -> list[tuple[str, float, float]]:
    """Text runs of every page as (text, font size, y position); "" marks a page break."""
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise ExtractionError("The PDF is encrypted; upload an unprotected copy.")
    pages = len(reader.pages)
    if pages > limits.max_pages:
        raise ExtractionError(
            f"The PDF has {pages:,} pages; the limit per document is {limits.max_pages:,}. "
            "Split it into smaller documents."
        )
    lines: list[tuple[str, float, float]] = []
    chars = 0
    for page in reader.pages:
        limits.check_time()
        page_lines: list[tuple[str, float, float]] = []

        def visit(text, cm, tm, font_dict, font_size, page_lines=page_lines):
            if text.strip():
                scale = abs(tm[3]) if tm and tm[3] else 1.0
                page_lines.append((text.strip(), round(font_size * scale, 1), tm[5]))
                if len(page_lines) % 256 == 0:
                    limits.check_time()

        page.extract_text(visitor_text=visit)
        chars += sum(len(text) for text, _, _ in page_lines)
        limits.check_chars(chars, what="PDF")
        lines.extend(page_lines)
        lines.append(PAGE_BREAK)  # a page break ends a paragraph
    return lines


def _body_size(lines: list[tuple[str, float, float]]) -> tuple[Counter, float]:
    """Characters per font size, and the size most text is set in."""
    sizes: Counter = Counter()
    for text, size, _ in lines:
        if text:
            sizes[size] += len(text)
    return sizes, max((s for s in sizes if s), key=lambda s: sizes[s], default=0.0)


def _pdf_blocks(lines: list[tuple[str, float, float]], limits: Limits) -> Extracted:
    """Headings by font size (a title's lines joined), paragraphs by vertical gaps and by
    the text boxes of the layout path (a box that goes on mid-sentence goes on)."""
    sizes, body = _body_size(lines)
    if not sizes:
        return Extracted(limits)
    heading_sizes = sorted({s for s in sizes if s > body * 1.1}, reverse=True)[:6]
    blocks = _PdfBlocks(Extracted(limits), body)
    for text, size, y in lines:
        if not text:
            blocks.box_end(page=size == PAGE_BREAK[1])
        elif size in heading_sizes:
            blocks.heading_line(text, level=heading_sizes.index(size) + 1)
        else:
            blocks.body_line(text, y)
    blocks.flush()
    return blocks.result


@dataclass
class _PdfBlocks:
    """Text runs read into `result`: the heading and the paragraph being read."""

    result: Extracted
    body: float  # the font size most text is set in
    paragraph: list[str] = field(default_factory=list)
    heading: list[str] = field(default_factory=list)  # a title may wrap
    heading_level: int = 0
    last_y: float | None = None
    boxed: bool = False  # a text box ended since the last line

    def flush(self) -> None:
        """Add the heading and the paragraph being read."""
        if self.heading:
            self.result.add(_join_lines(self.heading), level=self.heading_level)
            self.heading.clear()
        if self.paragraph:
            self.result.add(_join_lines(self.paragraph))
            self.paragraph.clear()

    def box_end(self, *, page: bool) -> None:
        """The end of a text box, or of a page: that ends a paragraph unless it stopped
        mid-sentence."""
        if page and not (self.paragraph and _goes_on(self.paragraph[-1])):
            self.flush()
        self.boxed = True
        self.last_y = None

    def heading_line(self, text: str, level: int) -> None:
        """A line of a heading: one more line of the heading being read, unless of another
        level or numbered (a heading of its own)."""
        if not self.heading or level != self.heading_level or _NUMBERED.match(text):
            self.flush()
        self.heading.append(text)
        self.heading_level = level

    def body_line(self, text: str, y: float) -> None:
        """A line of body text: one more line of the paragraph being read, unless it
        starts one (`_paragraph_starts`) or a heading was being read."""
        if self.heading or self._paragraph_starts(text, y):
            self.flush()
        self.paragraph.append(text)
        self.last_y = y
        self.boxed = False

    def _paragraph_starts(self, text: str, y: float) -> bool:
        """Whether a line of body text starts a paragraph: after a text box that ended at
        a sentence's end (and it does not go on in lower case), or after a vertical gap
        larger than ~1.6 lines."""
        boxed = (
            self.paragraph
            and self.boxed
            and not (_goes_on(self.paragraph[-1]) or text[:1].islower())
        )
        return bool(boxed) or (self.last_y is not None and abs(self.last_y - y) > self.body * 2.2)


def _goes_on(line: str) -> bool:
    """Does a line stop mid-sentence (no closing mark: the next one continues it)?"""
    return line[-1:].isalnum() or line.endswith((",", "-"))


def _join_lines(lines: list[str]) -> str:
    """Join a paragraph's lines (text runs) with `_JOIN`, undoing hyphenated line breaks
    (linear)."""
    parts: list[str] = []
    tail = ""  # the last two characters joined so far
    for line in lines:
        if tail.endswith("-") and tail != " -" and line[:1].islower():
            parts[-1] = parts[-1][:-1]  # undo a hyphenated line break
            tail = (tail[:-1] + line)[-2:]
        elif parts:
            parts.append(_JOIN)
            tail = (tail + " " + line)[-2:]
        else:
            tail = line[-2:]
        if line:
            parts.append(line)
    return "".join(parts)


# Page furniture: a page number ("12", "iv", "Page 3 of 9") or a running header or footer
# (the same words at the top or bottom of RUNNING_PAGES pages or more: "CHAPTER 1.
# DEFINITIONS AND OVERVIEW 1.3. …", "CONTENTS"). A table of contents: a line with dot
# leaders (or of dots alone), and on a page of CONTENTS_LINES of them also its lines of page
# numbers and of numbered entries (an entry that wraps, "1 1 1 2 2" when the numbers are
# laid out apart).
RUNNING_PAGES = 3
RUNNING_CAPITALS = 2
EDGE_LINES = 2
CONTENTS_LINES = 3
_PAGE_NUMBER = re.compile(r"(?i)(?:page\s+)?(?:\d{1,4}|[ivxlc]{1,7})(?:\s*(?:of|/)\s*\d{1,4})?")
_DOT_LEADERS = re.compile(r"(?:\.\s?){6,}")
_DOTS = re.compile(r"[.\s\u2026]+")  # leaders laid out as lines of their own
_NUMBERS = re.compile(r"(?i)(?:(?:\d{1,4}|[ivxlc]{1,7})\s*)+")
_NUMBERED = re.compile(r"\d{1,2}(?:\.\d{1,2})*\s*\S")
_WORDS = re.compile(r"[^\W\d_]+")


def _in_capitals(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 4 and all(c.isupper() for c in letters)


def _running_key(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower())[:4])


def _without_page_furniture(
    lines: list[tuple[str, float, float]],
) -> list[tuple[str, float, float]]:
    """Drop page numbers, running headers and footers, and a table of contents (see
    above); linear."""
    pages = _pages(lines)
    dropped = _edge_furniture(lines, pages)
    for page in pages:
        dropped.update(_contents_lines(lines, page))
    return [line for i, line in enumerate(lines) if i not in dropped]


def _pages(lines: list[tuple[str, float, float]]) -> list[list[int]]:
    """The indexes of each page's text lines."""
    pages: list[list[int]] = [[]]
    for i, (text, size, _) in enumerate(lines):
        if text:
            pages[-1].append(i)
        elif size == PAGE_BREAK[1]:
            pages.append([])
    return pages


def _edge_furniture(lines: list[tuple[str, float, float]], pages: list[list[int]]) -> set[int]:
    """The page numbers and running headers and footers among the lines at the edges of
    the pages (a page of nothing else keeps them: that is its text)."""
    edges = [set(p[:EDGE_LINES] + p[-EDGE_LINES:]) for p in pages]
    seen = _running_pages(lines, edges)
    # Running headers that name the section (LaTeX's "CHAPTER 2. GETTING AND …"): a line in
    # capitals, no larger than the text, at the edge of RUNNING_CAPITALS pages or more.
    _, body = _body_size(lines)
    capitals = [
        {i for i in edge if lines[i][1] <= body and _in_capitals(lines[i][0])} for edge in edges
    ]
    running_capitals = sum(1 for c in capitals if c) >= RUNNING_CAPITALS
    dropped = set()
    for page, edge, caps in zip(pages, edges, capitals, strict=True):
        furniture = set(caps) if running_capitals else set()
        furniture.update(i for i in edge if _page_number_or_running(lines[i][0], seen))
        if len(furniture) < len(page):
            dropped.update(furniture)
    return dropped


def _running_pages(lines: list[tuple[str, float, float]], edges: list[set[int]]) -> dict:
    """The pages at whose edges each running key (`_running_key`) is found."""
    seen: defaultdict[str, set[int]] = defaultdict(set)
    for number, edge in enumerate(edges):
        for i in edge:
            if key := _running_key(lines[i][0]):
                seen[key].add(number)
    return seen


def _page_number_or_running(text: str, seen: dict) -> bool:
    """A page number, or a line whose key is at the edge of RUNNING_PAGES pages or more."""
    key = _running_key(text)
    return bool(_PAGE_NUMBER.fullmatch(text)) or bool(key and len(seen[key]) >= RUNNING_PAGES)


def _contents_lines(lines: list[tuple[str, float, float]], page: list[int]) -> list[int]:
    """A page's lines of a table of contents: lines with dot leaders (or of dots alone), and
    on a page of CONTENTS_LINES of them also its lines of page numbers and numbered
    entries."""
    leaders = [i for i in page if _DOT_LEADERS.search(lines[i][0]) or _DOTS.fullmatch(lines[i][0])]
    if len(leaders) < CONTENTS_LINES:
        return leaders
    return leaders + [
        i for i in page if _NUMBERS.fullmatch(lines[i][0]) or _NUMBERED.match(lines[i][0])
    ]
