"""Turn an uploaded file into plain text plus heading/paragraph blocks with character spans.

Supported: PDF (pypdf; headings recognised by font size), HTML (navigation, scripts and page
chrome stripped, headings kept), Markdown and plain text. The returned `text` is what chunk
spans point into and what the public knowledge page shows.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath

from bs4 import BeautifulSoup, NavigableString, Tag
from markdown_it import MarkdownIt
from pypdf import PdfReader
from pypdf.errors import PdfReadError

PDF = "application/pdf"
HTML = "text/html"
MARKDOWN = "text/markdown"
PLAIN = "text/plain"
SUPPORTED_EXTENSIONS = {
    ".pdf": PDF,
    ".html": HTML,
    ".htm": HTML,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": PLAIN,
    ".text": PLAIN,
}
SUPPORTED_CONTENT_TYPES = {PDF, HTML, MARKDOWN, PLAIN, "text/x-markdown", "application/xhtml+xml"}


class ExtractionError(Exception):
    """The file cannot be turned into text (the message says why, for the document's error)."""


@dataclass(frozen=True)
class Block:
    text: str
    level: int  # 0 for body text, 1-6 for headings
    start: int
    end: int


@dataclass
class Extracted:
    text: str = ""
    blocks: list[Block] = field(default_factory=list)

    def add(self, text: str, level: int = 0) -> None:
        """Append a block (whitespace collapsed), separated from the previous by a blank line."""
        text = re.sub(r"\s+([.,;:!?)])", r"\1", re.sub(r"\s+", " ", text)).strip()
        if not text:
            return
        if self.text:
            self.text += "\n\n"
        start = len(self.text)
        self.text += text
        self.blocks.append(Block(text=text, level=level, start=start, end=len(self.text)))


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


def extract(*, data: bytes, content_type: str) -> Extracted:
    """Extract text and blocks; raise ExtractionError when there is no text to index."""
    if content_type == PDF:
        result = _extract_pdf(data)
    else:
        text = _decode(data)
        if content_type == HTML:
            result = _extract_html(text)
        elif content_type == MARKDOWN:
            result = _extract_markdown(text)
        else:
            result = _extract_plain(text)
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


# --------------------------------------------------------------------------- PDF


def _extract_pdf(data: bytes) -> Extracted:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ExtractionError("The PDF is encrypted; upload an unprotected copy.")
        lines: list[tuple[str, float, float]] = []  # text, font size, y position
        for page in reader.pages:
            page_lines: list[tuple[str, float, float]] = []

            def visit(text, cm, tm, font_dict, font_size, page_lines=page_lines):
                if text.strip():
                    scale = abs(tm[3]) if tm and tm[3] else 1.0
                    page_lines.append((text.strip(), round(font_size * scale, 1), tm[5]))

            page.extract_text(visitor_text=visit)
            lines.extend(page_lines)
            lines.append(("", 0.0, 0.0))  # page break ends a paragraph
    except PdfReadError as exc:
        raise ExtractionError(f"The PDF cannot be read: {exc}.") from exc

    sizes = Counter()
    for text, size, _ in lines:
        sizes[size] += len(text)
    if not sizes:
        return Extracted()
    body = max((s for s in sizes if s), key=lambda s: sizes[s], default=0.0)
    heading_sizes = sorted({s for s in sizes if s > body * 1.1}, reverse=True)[:6]

    result = Extracted()
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
    out = ""
    for line in lines:
        if out.endswith("-") and not out.endswith(" -") and line[:1].islower():
            out = out[:-1] + line  # undo a hyphenated line break
        else:
            out = f"{out} {line}" if out else line
    return out


# --------------------------------------------------------------------------- HTML

_HTML_DROP = [
    "script",
    "style",
    "noscript",
    "template",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "button",
    "iframe",
    "svg",
    "canvas",
    "select",
    "input",
]
_HTML_BLOCKS = {"p", "li", "dt", "dd", "pre", "blockquote", "figcaption", "caption", "tr"}
_HTML_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_CHROME = re.compile(r"\b(nav|navbar|menu|breadcrumb|cookie|footer|sidebar|skip-link)\b", re.I)


def _extract_html(html: str) -> Extracted:
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(_HTML_DROP):
        tag.decompose()
    for tag in soup.find_all(attrs={"role": ["navigation", "banner", "contentinfo", "search"]}):
        tag.decompose()
    for tag in soup.find_all(attrs={"aria-hidden": "true"}):
        tag.decompose()
    for tag in soup.find_all(True):
        if tag.decomposed or tag.attrs is None:
            continue
        marker = " ".join([*(tag.get("class") or []), tag.get("id") or ""])
        if (
            marker.strip()
            and _CHROME.search(marker)
            and tag.name not in ("main", "article", "body")
        ):
            tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    result = Extracted()
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    if title and not root.find("h1"):
        result.add(title, level=1)
    inline: list[str] = []

    def flush() -> None:
        if inline:
            result.add(" ".join(inline))
            inline.clear()

    def walk(node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if child.__class__ is NavigableString and child.strip():
                    inline.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            if child.name in _HTML_HEADINGS:
                flush()
                result.add(child.get_text(" ", strip=True), level=_HTML_HEADINGS[child.name])
            elif child.name in _HTML_BLOCKS:
                flush()
                cells = child.find_all(["td", "th"]) if child.name == "tr" else []
                text = (
                    " | ".join(c.get_text(" ", strip=True) for c in cells)
                    if cells
                    else child.get_text(" ", strip=True)
                )
                result.add(text)
            elif child.name == "br":
                inline.append(" ")
            elif child.name in {"div", "section", "ul", "ol", "dl", "table", "tbody", "thead"}:
                flush()
                walk(child)
                flush()
            else:
                walk(child)

    walk(root)
    flush()
    return result


# --------------------------------------------------------------------------- Markdown

_md = MarkdownIt("commonmark").enable("table")


def _extract_markdown(text: str) -> Extracted:
    result = Extracted()
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
            result.add(token.content)
    return result


# --------------------------------------------------------------------------- plain text


def _extract_plain(text: str) -> Extracted:
    """Paragraphs split on blank lines; a short line underlined with === / --- or a short
    line in capitals without end punctuation counts as a heading."""
    result = Extracted()
    for raw in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines = [line.rstrip() for line in raw.strip("\n").split("\n")]
        if not any(lines):
            continue
        if len(lines) >= 2 and re.fullmatch(r"=+|-+", lines[1].strip()):
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


def _looks_like_heading(line: str) -> bool:
    line = line.strip()
    if not line or len(line) > 80 or line[-1] in ".,;:!?":
        return False
    letters = [c for c in line if c.isalpha()]
    return bool(letters) and (line.isupper() or bool(re.match(r"^#{1,6}\s", line)))
