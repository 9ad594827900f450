"""Turn an uploaded file into plain text plus heading/paragraph blocks with character spans.

Supported: PDF (pypdf; pdfminer.six when the words of its text layer run together; headings
recognised by font size, page furniture dropped), HTML (navigation, scripts and page chrome
stripped, headings kept), Markdown (its raw HTML read as HTML) and plain text (titles, FAQ
questions, lists and code read from its layout). The returned `text` is what chunk spans
point into and what the public knowledge page shows.

Uploads are untrusted: extraction is linear in the input, never recurses over the document
tree, and stops with an `ExtractionError` (which fails the document with its message) at the
limits in `Limits`: characters of text, PDF pages, PDF stream sizes, HTML nesting depth and a
wall-clock deadline that is checked as the work proceeds. `guards` refuse what would expand
past them before any parser runs (decompressed PDF streams, image pixels, line length, size),
and indexing runs every extractor in a child process (`sandbox.extract_isolated`) under an
address-space and CPU limit that is killed at the deadline, so what the guards miss costs the
child, never the worker.

`base` holds the content types, limits, versions and the `Extracted` result; `pdf` (with
`pdf_layout`), `html` (with `html_tree`: chrome, removals and visible text), `text`
(Markdown) and `plain` each build one; `questions` makes FAQ questions written as
paragraphs head their answers (HTML and Markdown). Import from this package, not from its
modules.
"""

from __future__ import annotations

from pathlib import PurePath

from knowledge.extraction.base import (
    EXTRACTOR_VERSION,
    EXTRACTOR_VERSIONS,
    GZIP_SUFFIX,
    HTML,
    HTML_MAX_DEPTH,
    MARKDOWN,
    MAX_INDENT,
    PDF,
    PDF_MAX_STREAM_BYTES,
    PLAIN,
    SUPPORTED_CONTENT_TYPES,
    SUPPORTED_EXTENSIONS,
    Block,
    Extracted,
    ExtractionError,
    Limits,
    extractor_version,
)
from knowledge.extraction.guards import input_check, text_check
from knowledge.extraction.html import _extract_html
from knowledge.extraction.pdf import _extract_pdf
from knowledge.extraction.plain import _extract_plain
from knowledge.extraction.sandbox import extract_isolated
from knowledge.extraction.text import _extract_markdown

__all__ = [
    "EXTRACTOR_VERSION",
    "EXTRACTOR_VERSIONS",
    "GZIP_SUFFIX",
    "HTML",
    "HTML_MAX_DEPTH",
    "MARKDOWN",
    "MAX_INDENT",
    "PDF",
    "PDF_MAX_STREAM_BYTES",
    "PLAIN",
    "SUPPORTED_CONTENT_TYPES",
    "SUPPORTED_EXTENSIONS",
    "Block",
    "Extracted",
    "ExtractionError",
    "Limits",
    "detect_content_type",
    "extract",
    "extract_isolated",
    "extractor_version",
]


def detect_content_type(*, filename: str, declared: str, head: bytes) -> str | None:
    """Return the supported content type of an upload, or None when it is not one we index.

    The extension decides; the declared type may only agree with it or be generic, and the
    first bytes must fit (a PDF starts with %PDF-, text types hold no NUL bytes).
    """
    content_type = SUPPORTED_EXTENSIONS.get(PurePath(filename or "").suffix.lower())
    if content_type is None:
        return None
    declared = (declared or "").split(";")[0].strip().lower()
    generic = {"", "application/octet-stream", "binary/octet-stream", "text/plain"}
    if declared not in generic and declared not in SUPPORTED_CONTENT_TYPES:
        return None
    if content_type == PDF:
        return PDF if head.lstrip().startswith(b"%PDF-") else None
    return content_type if b"\x00" not in head else None


def extract(*, data: bytes, content_type: str, limits: Limits | None = None) -> Extracted:
    """Extract text and blocks in this process; raise ExtractionError when there is no text to
    index or the file passes one of `limits` (`guards` check it before parsing). Indexing
    extracts untrusted uploads in a child process instead (`extract_isolated`)."""
    limits = limits or Limits()
    input_check(data, content_type, limits)
    if content_type == PDF:
        result = _extract_pdf(data, limits)
    else:
        text = _decode(data)
        text_check(text, content_type, limits)
        if content_type == HTML:
            result = _extract_html(text, limits)
        elif content_type == MARKDOWN:
            result = _extract_markdown(text, limits)
        else:
            result = _extract_plain(text, limits)
    if not result.text.strip():
        kind = "PDF" if content_type == PDF else "file"
        hint = " (is it a scanned image without a text layer?)" if content_type == PDF else ""
        raise ExtractionError(f"The {kind} contains no extractable text{hint}.")
    return result


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")
