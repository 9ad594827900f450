"""Hostile uploads for the extraction tests, generated (no fixtures on disk)."""

from __future__ import annotations

import base64
import gzip
import zlib


def pdf_with_content(content: bytes, *, flate: bool = False, pages: int = 1) -> bytes:
    """A PDF whose every page draws `content` (compressed with FlateDecode when `flate`)."""
    stream = zlib.compress(content, 9) if flate else content
    filters = b" /Filter /FlateDecode" if flate else b""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled in below
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d%s >>\nstream\n" % (len(stream), filters) + stream + b"\nendstream",
    ]
    kids = []
    for _ in range(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    return _pdf(objects)


def decompression_bomb_pdf(inflated_bytes: int = 80 * 1024 * 1024) -> bytes:
    """A ~80 KB PDF whose content stream inflates to `inflated_bytes` (spaces)."""
    return pdf_with_content(
        b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET\n" + b" " * inflated_bytes, flate=True
    )


def text_pdf(pages: int, line: str = "Refunds take five business days.") -> bytes:
    """A PDF of `pages` pages that each show one line of text."""
    return pdf_with_content(b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % line.encode(), pages=pages)


def nested_divs_html(depth: int, text: str = "Deep text at the bottom.") -> bytes:
    return (
        "<html><body>" + "<div>" * depth + f"<p>{text}</p>" + "</div>" * depth + "</body></html>"
    ).encode()


DEFAULT_SENTENCE = "Refunds reach your card within five to ten business days after we receive it."


def paragraphs(size: int, *, html: bool = False, sentence: str = DEFAULT_SENTENCE) -> bytes:
    """At most `size` bytes of short, distinct help-center paragraphs (plain text or HTML)."""
    head, tail = ("<html><body><h1>Refunds</h1>", "</body></html>") if html else ("", "")
    parts: list[str] = []
    total = len(head) + len(tail)
    i = 0
    while True:
        paragraph = f"{sentence} Case {i}.".lstrip()
        if html:
            paragraph = f"<p>{paragraph}</p>"
        if total + len(paragraph) + 2 > size:
            break
        parts.append(paragraph)
        total += len(paragraph) + 2
        i += 1
    return (head + "\n\n".join(parts) + tail).encode()


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (numbered from 1; the first is the catalog)."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _stream(dictionary: bytes, data: bytes) -> bytes:
    return b"<< /Length %d %s >>\nstream\n" % (len(data), dictionary) + data + b"\nendstream"


def _zeros_deflated(size: int) -> bytes:
    """`size` zero bytes, deflated (~1 KB per MiB), without holding them."""
    deflater = zlib.compressobj(9)
    piece = bytes(1024 * 1024)
    parts = [deflater.compress(piece) for _ in range(size // len(piece))]
    return b"".join(parts) + deflater.compress(bytes(size % len(piece))) + deflater.flush()


def font_bomb_pdf(inflated_bytes: int = 64 * 1024 * 1024, *, ascii85: bool = False) -> bytes:
    """A ~70 KB PDF typeset with a CID font (Type0, Identity-H: its words run together, so the
    layout reader, pdfminer, reads it) whose embedded TrueType file (FontFile2) inflates to
    `inflated_bytes`: pypdf never decodes it, pdfminer decodes all of it. `ascii85` wraps the
    Flate data in base-85."""
    font = _zeros_deflated(inflated_bytes)
    filters = b"/Filter /FlateDecode"
    if ascii85:
        font = base64.a85encode(font) + b"~>"
        filters = b"/Filter [/ASCII85Decode /FlateDecode]"
    words = "Refundsreachyourcardwithinfivetotenbusinessdaysafterwereceiveit"
    content = b"BT /F1 12 Tf 72 720 Td <%s> Tj ET" % words.encode("utf-16-be").hex().encode()
    to_unicode = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Bomb def "
        b"1 begincodespacerange <0000> <FFFF> endcodespacerange "
        b"1 beginbfrange <0000> <00FF> <0000> endbfrange endcmap "
        b"CMapName currentdict /CMap defineresource pop end end"
    )
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
            b"<< /Type /Font /Subtype /Type0 /BaseFont /Bomb /Encoding /Identity-H "
            b"/DescendantFonts [8 0 R] /ToUnicode 9 0 R >>",
            _stream(b"", content),
            b"<< /Type /FontDescriptor /FontName /Bomb /Flags 32 /FontBBox [0 0 1000 1000] "
            b"/ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 "
            b"/FontFile2 7 0 R >>",
            _stream(filters + b" /Length1 %d" % inflated_bytes, font),
            b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Bomb /CIDSystemInfo << "
            b"/Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor 6 0 R "
            b"/DW 500 >>",
            _stream(b"", to_unicode),
        ]
    )


def image_bomb_pdf(width: int = 100_000, height: int = 100_000) -> bytes:
    """A PDF with a line of text and an image XObject declaring `width` x `height` RGB pixels
    (its Flate data inflates to 64 MiB of them, a renderer would allocate 30 GB)."""
    pixels = _zeros_deflated(64 * 1024 * 1024)
    content = (
        b"BT /F1 12 Tf 72 720 Td (Refunds take five days.) Tj ET q 100 0 0 100 72 500 cm /Im1 Do Q"
    )
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << "
            b"/F1 4 0 R >> /XObject << /Im1 6 0 R >> >> /Contents 5 0 R >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            _stream(b"", content),
            _stream(
                b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB "
                b"/BitsPerComponent 8 /Filter /FlateDecode" % (width, height),
                pixels,
            ),
        ]
    )


def tiny_elements_html(size: int) -> bytes:
    """`size` bytes of HTML made of one-letter paragraphs: ~50 times its size in memory
    (10 MiB took ~900 MiB and ~90 s to extract in the worker)."""
    return b"<html><body>" + b"<p>a</p>" * (size // 8) + b"</body></html>"


def slow_markdown(size: int) -> bytes:
    """`size` bytes of one paragraph of unclosed image links ("![![![…", 40 to a line):
    markdown-it parses ~5 KB of it a second without returning to our deadline checks (the
    paragraph is one inline run; 10 MiB would take hours)."""
    return b"# Help\n\n" + b"\n".join([b"![" * 40] * (size // 81))


def single_line_text(size: int) -> bytes:
    """`size` bytes of words on one line: no paragraph, no heading, one block of all of it."""
    return b"refund " * (size // 7)


def gzip_bomb(inflated_bytes: int = 64 * 1024 * 1024, *, layers: int = 2) -> bytes:
    """Markdown gzipped `layers` times (a gzip inside a gzip), inflating to `inflated_bytes`."""
    data = gzip.compress(b"# Refunds\n\n" + b" " * inflated_bytes, 9)
    for _ in range(layers - 1):
        data = gzip.compress(data, 9)
    return data
