"""A tiny PDF writer: text lines in the standard Helvetica fonts, wrapped onto A4 pages.

Enough to generate the demo help-center PDF (real, extractable text) and test files without a
PDF library. Headings are written larger and bold, as a word processor would.
"""

from __future__ import annotations

import textwrap

PAGE_WIDTH, PAGE_HEIGHT = 595, 842  # A4 in points
MARGIN = 56
STYLES = {  # kind -> (font resource, size, leading, wrap width in characters)
    "h1": ("F2", 18, 26, 48),
    "h2": ("F2", 13, 20, 70),
    "p": ("F1", 10, 14, 95),
}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _layout(blocks: list[tuple[str, str]]) -> list[list[str]]:
    """Place (kind, text) blocks on pages; return each page's content-stream operators."""
    pages: list[list[str]] = [[]]
    y = PAGE_HEIGHT - MARGIN
    for kind, text in blocks:
        font, size, leading, width = STYLES[kind]
        lines = textwrap.wrap(text, width) or [""]
        needed = leading * len(lines) + (10 if kind != "p" else 6)
        if y - needed < MARGIN:
            pages.append([])
            y = PAGE_HEIGHT - MARGIN
        if kind != "p":
            y -= 8
        for line in lines:
            pages[-1].append(f"BT /{font} {size} Tf {MARGIN} {y} Td ({_escape(line)}) Tj ET")
            y -= leading
        y -= 6
    return pages


def pdf_bytes(blocks: list[tuple[str, str]], *, drawing_only: bool = False) -> bytes:
    """Return a PDF of `blocks` ("h1" | "h2" | "p", text); `drawing_only` draws boxes, no text."""
    pages = [["0.5 g 56 600 480 180 re f"]] if drawing_only else _layout(blocks)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled in below
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
    ]
    kids = []
    for ops in pages:
        stream = "\n".join(ops).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content_ref = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] "
            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>"
            % (PAGE_WIDTH, PAGE_HEIGHT, content_ref)
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
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
