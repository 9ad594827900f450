"""PDF: the text layer read by pypdf, headings recognised by font size."""

from __future__ import annotations

import io
from collections import Counter

from pypdf import PdfReader, apply_configuration
from pypdf.errors import LimitReachedError, PyPdfError

from knowledge.extraction.base import (
    _JOIN,
    PDF_MAX_STREAM_BYTES,
    Extracted,
    ExtractionError,
    Limits,
)

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
    return _pdf_blocks(lines, limits)


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
        if chars > limits.max_chars:
            raise ExtractionError(
                f"The PDF holds more than {limits.max_chars:,} characters of text, the limit "
                "per document; split it into smaller documents."
            )
        lines.extend(page_lines)
        lines.append(("", 0.0, 0.0))  # page break ends a paragraph
    return lines


def _pdf_blocks(lines: list[tuple[str, float, float]], limits: Limits) -> Extracted:
    sizes = Counter()
    for text, size, _ in lines:
        sizes[size] += len(text)
    if not sizes:
        return Extracted(limits)
    body = max((s for s in sizes if s), key=lambda s: sizes[s], default=0.0)
    heading_sizes = sorted({s for s in sizes if s > body * 1.1}, reverse=True)[:6]

    result = Extracted(limits)
    paragraph: list[str] = []
    last_y: float | None = None

    def flush() -> None:
        if paragraph:
            result.add(_join_lines(paragraph))
            paragraph.clear()

    for text, size, y in lines:
        if not text:
            flush()
            last_y = None
            continue
        if size in heading_sizes:
            flush()
            result.add(text, level=heading_sizes.index(size) + 1)
            last_y = None
            continue
        # A vertical gap larger than ~1.6 lines starts a new paragraph.
        if last_y is not None and abs(last_y - y) > body * 2.2:
            flush()
        paragraph.append(text)
        last_y = y
    flush()
    return result


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
