"""PDF: the text layer read by pypdf, headings recognised by font size."""

from __future__ import annotations

import io
import re
from collections import Counter, defaultdict

from pypdf import PdfReader, apply_configuration
from pypdf.errors import LimitReachedError, PyPdfError

from knowledge.extraction.base import (
    _JOIN,
    PDF_MAX_STREAM_BYTES,
    Extracted,
    ExtractionError,
    Limits,
)
from knowledge.extraction.pdf_layout import PAGE_BREAK, layout_lines, unspaced

_PDF_LIMITS = dict.fromkeys(
    (
        "maximum_declared_stream_length",
        "array_based_stream_maximum_output_length",
        "jbig2_maximum_output_length",
        "lzw_maximum_output_length",
        "run_length_maximum_output_length",
        "zlib_maximum_output_length",
        "brotli_maximum_output_length",
        "image_maximum_buffer_size",
    ),
    PDF_MAX_STREAM_BYTES,
) | {"stream_decoding_work_maximum_length": 4 * PDF_MAX_STREAM_BYTES}


def _extract_pdf(data: bytes, limits: Limits) -> Extracted:
    """Read the text layer under pypdf's resource limits (tightened), page by page.

    Any failure inside pypdf — a decompression bomb (LimitReachedError), a malformed file, or
    pypdf's own bugs on hostile input — becomes an ExtractionError with the reason."""
    try:
        with apply_configuration(**_PDF_LIMITS):
            lines = _pdf_lines(data, limits)
        if unspaced(lines):
            lines = layout_lines(data, limits)
    except ExtractionError:
        raise
    except LimitReachedError as exc:
        raise ExtractionError(
            f"The PDF expands beyond the safe limits (a stream may decompress to at most "
            f"{PDF_MAX_STREAM_BYTES // (1024 * 1024)} MiB): {_reason(exc)}."
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

    result = Extracted(limits)
    paragraph: list[str] = []
    heading: list[str] = []  # the lines of a heading being read (a title may wrap)
    heading_level = 0
    last_y: float | None = None
    boxed = False  # a text box ended since the last line

    def flush() -> None:
        if heading:
            result.add(_join_lines(heading), level=heading_level)
            heading.clear()
        if paragraph:
            result.add(_join_lines(paragraph))
            paragraph.clear()

    for text, size, y in lines:
        if not text:
            if size == PAGE_BREAK[1] and not (paragraph and _goes_on(paragraph[-1])):
                flush()
            boxed = True
            last_y = None
            continue
        if size in heading_sizes:
            level = heading_sizes.index(size) + 1
            if not heading or level != heading_level or _NUMBERED.match(text):
                flush()
            heading.append(text)
            heading_level = level
            continue
        if heading:
            flush()
        if paragraph and boxed and not (_goes_on(paragraph[-1]) or text[:1].islower()):
            flush()
        # A vertical gap larger than ~1.6 lines starts a new paragraph.
        if last_y is not None and abs(last_y - y) > body * 2.2:
            flush()
        paragraph.append(text)
        last_y = y
        boxed = False
    flush()
    return result


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
    pages: list[list[int]] = [[]]  # indexes of each page's text lines
    for i, (text, size, _) in enumerate(lines):
        if text:
            pages[-1].append(i)
        elif size == PAGE_BREAK[1]:
            pages.append([])
    edges = [set(p[:EDGE_LINES] + p[-EDGE_LINES:]) for p in pages]
    seen: defaultdict[str, set[int]] = defaultdict(set)
    for number, edge in enumerate(edges):
        for i in edge:
            if key := _running_key(lines[i][0]):
                seen[key].add(number)
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
        for i in edge:
            text = lines[i][0]
            key = _running_key(text)
            if _PAGE_NUMBER.fullmatch(text) or (key and len(seen[key]) >= RUNNING_PAGES):
                furniture.add(i)
        if len(furniture) < len(page):  # a page of nothing else: that is its text
            dropped.update(furniture)
        leaders = [
            i for i in page if _DOT_LEADERS.search(lines[i][0]) or _DOTS.fullmatch(lines[i][0])
        ]
        dropped.update(leaders)
        if len(leaders) >= CONTENTS_LINES:
            dropped.update(
                i for i in page if _NUMBERS.fullmatch(lines[i][0]) or _NUMBERED.match(lines[i][0])
            )
    return [line for i, line in enumerate(lines) if i not in dropped]
