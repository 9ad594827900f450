"""Checks of an upload's bytes before any parser sees them (`input_check`).

Parsers allocate what a file declares: pdfminer inflates every stream it touches (embedded
font files too, which pypdf never decodes) with no limit, so a 3 KB PDF holding a compressed
64 MiB font took 1.25 GiB. These guards measure what a file expands to without keeping it,
and refuse it with a reason for the document's error:
- the input's size (`Limits.max_bytes`);
- PDF: every stream's declared length and its decompressed size, one stream and all of them
  together (Flate inflated in pieces and counted, LZW and run-length decoded by pypdf under
  the same cap; ASCII hex and base-85 layers undone first), and the pixels an image declares;
- text and Markdown: the longest line (one 10 MiB line is no help article, and the parsers'
  inline rules run over a whole paragraph at a time).
HTML nesting is bounded by the parser itself (`html.HTML_MAX_DEPTH`). The memory, CPU and
wall-clock limits of the process that extracts (`sandbox`) stand behind every guard.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Iterator

from pypdf import apply_configuration
from pypdf.errors import LimitReachedError, PyPdfError
from pypdf.filters import LZWDecode, RunLengthDecode

from knowledge.extraction.base import MARKDOWN, PDF, PLAIN, ExtractionError, Limits
from knowledge.extraction.pdf import pdf_limits

_MIB = 1024 * 1024
# A stream starts after its dictionary's ">>" and the keyword; its dictionary is read back
# to the object's start (at most DICTIONARY_WINDOW bytes before it).
_STREAM = re.compile(rb">>\s*stream(?:\r\n|\r|\n)")
_OBJECT_START = re.compile(rb"\d+\s+\d+\s+obj\b")
DICTIONARY_WINDOW = 4096
_FILTER = re.compile(rb"/Filter\s*(\[[^\]]*\]|/[A-Za-z0-9]+)")
_NAME = re.compile(rb"/([A-Za-z0-9]+)")
_DECLARED = re.compile(rb"/(Length|DL)\s+(\d{1,20})\b(?!\s+\d+\s+R)")
_IMAGE = re.compile(rb"/Subtype\s*/Image\b")
_WIDTH = re.compile(rb"/(?:Width|W)\s+(\d{1,12})\b")
_HEIGHT = re.compile(rb"/(?:Height|H)\s+(\d{1,12})\b")
INFLATE_PIECE = 64 * 1024


def input_check(data: bytes, content_type: str, limits: Limits) -> None:
    """Raise ExtractionError when the file is larger than the limits allow or expands past
    them (see the module docstring)."""
    if len(data) > limits.max_bytes:
        raise ExtractionError(
            f"The file is {len(data):,} bytes; documents of at most {limits.max_bytes:,} bytes "
            "are read. Split it into smaller documents."
        )
    if content_type == PDF:
        pdf_streams_check(data, limits)


def text_check(text: str, content_type: str, limits: Limits) -> None:
    """Raise ExtractionError when a plain-text or Markdown file holds a line longer than
    `limits.max_line_chars` (found by one linear scan)."""
    if content_type not in (PLAIN, MARKDOWN) or len(text) <= limits.max_line_chars:
        return
    if re.search(rf"[^\n]{{{limits.max_line_chars + 1}}}", text):
        raise ExtractionError(
            f"The file holds a line longer than {limits.max_line_chars:,} characters; text "
            "documents are read line by line. Break it into paragraphs."
        )


def pdf_streams_check(data: bytes, limits: Limits) -> None:
    """Measure every stream of a PDF (module docstring); raise ExtractionError with
    "decompressed data too large" past `limits.max_stream_bytes` for one stream or
    `limits.max_total_stream_bytes` for all, or an image over `limits.max_image_pixels`."""
    total = 0
    for dictionary, body in _streams(data):
        limits.check_time()
        _declared_check(dictionary, limits)
        _image_check(dictionary, limits)
        size = _decoded_size(body, _filters(dictionary), limits)
        if size > limits.max_stream_bytes:
            raise _too_large(f"a stream decompresses to more than {_mib(limits.max_stream_bytes)}")
        total += size
        if total > limits.max_total_stream_bytes:
            raise _too_large(
                f"its streams decompress to more than {_mib(limits.max_total_stream_bytes)} "
                f"together ({len(data):,} bytes of file)"
            )


def _mib(size: int) -> str:
    return f"{size / _MIB:g} MiB"


def _too_large(what: str) -> ExtractionError:
    return ExtractionError(
        f"The PDF expands beyond the safe limits: {what} (decompressed data too large)."
    )


def _streams(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Each stream's dictionary (the bytes from its object's start) and raw body (up to
    "endstream", or the end of the file)."""
    for match in _STREAM.finditer(data):
        window = data[max(0, match.start() - DICTIONARY_WINDOW) : match.start() + 2]
        starts = list(_OBJECT_START.finditer(window))
        dictionary = window[starts[-1].end() :] if starts else window
        end = data.find(b"endstream", match.end())
        yield dictionary, data[match.end() : end if end >= 0 else len(data)]


def _filters(dictionary: bytes) -> list[bytes]:
    """The stream's filter names, in the order they apply (the outermost filter's, not those
    of an image's /DecodeParms or a nested dictionary: the first /Filter key)."""
    match = _FILTER.search(dictionary)
    return _NAME.findall(match.group(1)) if match else []


def _declared_check(dictionary: bytes, limits: Limits) -> None:
    """A declared length (/Length, or /DL: the decoded length) past the per-stream cap."""
    for key, value in _DECLARED.findall(dictionary):
        if int(value) > limits.max_stream_bytes:
            raise _too_large(
                f"a stream declares /{key.decode()} {int(value):,}, more than "
                f"{_mib(limits.max_stream_bytes)}"
            )


def _image_check(dictionary: bytes, limits: Limits) -> None:
    """An image whose declared width times height passes the pixel cap."""
    if not _IMAGE.search(dictionary):
        return
    width, height = _WIDTH.search(dictionary), _HEIGHT.search(dictionary)
    if width and height and int(width[1]) * int(height[1]) > limits.max_image_pixels:
        raise ExtractionError(
            f"The PDF holds an image of {int(width[1]):,} x {int(height[1]):,} pixels, more "
            f"than {limits.max_image_pixels:,} (decompressed data too large)."
        )


def _decoded_size(body: bytes, filters: list[bytes], limits: Limits) -> int:
    """How many bytes the stream decodes to through its compressing filters, counting at
    most one byte past the cap (the text layers' own filters, predictors and image codecs
    change little: they are left to the parsers under the process limits)."""
    cap = limits.max_stream_bytes
    data, size = body, len(body)
    for name in filters:
        if name in (b"ASCIIHexDecode", b"AHx"):
            data = _unhex(data)
        elif name in (b"ASCII85Decode", b"A85"):
            data = _un85(data)
        elif name in (b"FlateDecode", b"Fl"):
            return _inflated_size(data, cap)
        elif name in (b"LZWDecode", b"LZW", b"RunLengthDecode", b"RL"):
            return _pypdf_decoded_size(name, data, limits)
        else:
            return len(data)
        size = len(data)
    return size


def _unhex(data: bytes) -> bytes:
    digits = re.sub(rb"\s+", b"", data.split(b">", 1)[0])
    try:
        return binascii.unhexlify(digits + b"0" * (len(digits) % 2))  # odd: a last 0 implied
    except (binascii.Error, ValueError):
        return data  # malformed: the parsers report it


def _un85(data: bytes) -> bytes:
    try:
        return base64.a85decode(data.split(b"~>", 1)[0].strip(), ignorechars=b" \t\r\n\f")
    except ValueError:
        return data


def _inflated_size(data: bytes, cap: int) -> int:
    """Bytes a zlib stream inflates to (cap + 1 at most), in INFLATE_PIECE pieces that are
    counted and dropped; a damaged stream counts what inflated before the damage."""
    inflater = zlib.decompressobj()
    size = 0
    pending = data
    try:
        while pending and size <= cap:
            size += len(inflater.decompress(pending, INFLATE_PIECE))
            pending = inflater.unconsumed_tail
            if inflater.eof:
                break
    except zlib.error:
        pass
    return size


def _pypdf_decoded_size(name: bytes, data: bytes, limits: Limits) -> int:
    """LZW and run-length decoded by pypdf under the per-stream cap (one byte over it when
    the cap stopped it)."""
    decoder = LZWDecode if name.startswith(b"L") else RunLengthDecode
    try:
        with apply_configuration(**pdf_limits(limits)):
            return len(decoder.decode(data))
    except LimitReachedError:
        return limits.max_stream_bytes + 1
    except (PyPdfError, ValueError, IndexError, KeyError):
        return len(data)  # malformed: the parsers report it
