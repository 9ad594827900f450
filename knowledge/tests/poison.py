"""Hostile uploads for the extraction tests, generated (no fixtures on disk)."""

from __future__ import annotations

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
