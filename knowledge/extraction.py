"""Turn an uploaded file into plain text plus heading/paragraph blocks with character spans.

Supported: PDF (pypdf; headings recognised by font size), HTML (navigation, scripts and page
chrome stripped, headings kept), Markdown and plain text. The returned `text` is what chunk
spans point into and what the public knowledge page shows.

Uploads are untrusted: extraction is linear in the input, never recurses over the document
tree, and stops with an `ExtractionError` (which fails the document with its message) at the
limits in `Limits`: characters of text, PDF pages, PDF stream sizes, HTML nesting depth and a
wall-clock deadline that is checked as the work proceeds.
"""

from __future__ import annotations

import io
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath

from lxml import etree
from markdown_it import MarkdownIt
from pypdf import PdfReader, apply_configuration
from pypdf.errors import LimitReachedError, PyPdfError

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
    ".xhtml": HTML,
    ".rst": PLAIN,  # reStructuredText reads as plain text; its underlined titles are headings
}
# Debian compresses the text files under /usr/share/doc ("FAQ.gz", "README.Debian.gz"): an
# upload named NAME.gz is read as NAME, and a name without an extension there as plain text.
GZIP_SUFFIX = ".gz"
SUPPORTED_CONTENT_TYPES = {
    PDF,
    HTML,
    MARKDOWN,
    PLAIN,
    "text/x-markdown",
    "application/xhtml+xml",
    "text/x-rst",
}


class ExtractionError(Exception):
    """The file cannot be turned into text (the message says why, for the document's error)."""


# Bytes a single PDF stream may decompress to, and the decoding work per stream. A text layer
# needs far less; pypdf's defaults (75 MB, 300 MB) let one upload hold a worker's memory.
PDF_MAX_STREAM_BYTES = 32 * 1024 * 1024
# The version of each format's extractor, bumped whenever what it produces changes; documents
# an older one made are re-indexed (`services.documents_reextract_outdated`, daily and
# `manage.py reindex_outdated`), and only those: a change to HTML extraction never re-embeds
# a tenant's PDFs. HTML 1: inline text joined as laid out (no spaces inside "os.remove"),
# code blocks keep their lines, permalink anchors dropped, role="main" root; 2: headings over
# nothing (a site title above the page's h1) dropped; 3: XHTML with an XML declaration
# reads (it failed before); 4: a docutils local table of contents (<div class="contents
# topic">) dropped; 5: the source's spaces before punctuation kept ("git add ."), the
# paragraphs and listings of a <dd> or <li> kept apart, the terms of a list of sections
# (gitfaq) headings, an admonition's heading a label, callouts numbered with their command.
# 6: code lines keep their indentation. 7: FAQ entries without heading tags head their
# answers (a paragraph of one bold question, a "Q: …?" paragraph, an accordion's <summary>),
# and a list of nothing but links into the same page is dropped (the page's list of its own
# questions). 8: footnote references and back-links ("[6]", "[*]") dropped. 9: a
# run of three or more links into the page one to a line (<br>), a contents without a list,
# dropped. 10: the terms of a glossary or list of options open their definition's first
# paragraph ("-E, --tabstospaces: Convert each typed tab to spaces"), and a heading over
# nothing but removed links (a contents' section titles) is dropped. 11: struck-out text
# (<del>, <s>, <strike>: an old price, a defunct link) dropped unless it is all of its
# block's text (an entry struck out as obsolete keeps its heading). Markdown 1:
# fenced and indented code keeps its lines and their indentation (it was one collapsed
# line). Plain text 1: a title underlined (or over- and underlined, reStructuredText) with
# any repeated mark of = - ~ ^ * + # " ' ` : . _ is a heading (only = and - were, and any
# run of them). Others: 0, as before versions existed.
# (With HTML 5 a space closes up only before a punctuation-only token and chunks split only
# at sentence ends, for every format: that changed no PDF, Markdown or text passage of the
# demo, so those are not re-embedded for it; a new upload gets it.)
EXTRACTOR_VERSIONS = {HTML: 11, PDF: 0, MARKDOWN: 1, PLAIN: 1}
EXTRACTOR_VERSION = max(EXTRACTOR_VERSIONS.values())


def extractor_version(content_type: str) -> int:
    """The current extractor version of a (detected) content type."""
    return EXTRACTOR_VERSIONS.get(content_type, 0)


# libxml2 stops building the tree at this depth (ERR_RESOURCE_LIMIT); we fail the document.
HTML_MAX_DEPTH = 255


@dataclass(frozen=True)
class Limits:
    """What one document may cost: characters of text, PDF pages, and a wall-clock deadline
    (a `time.monotonic()` value) checked cooperatively while extracting."""

    max_chars: int = 20_000_000
    max_pages: int = 2000
    deadline: float | None = None
    seconds: float = 0.0

    @classmethod
    def within(cls, *, seconds: float, max_chars: int, max_pages: int) -> Limits:
        return cls(
            max_chars=max_chars,
            max_pages=max_pages,
            deadline=time.monotonic() + seconds,
            seconds=seconds,
        )

    def check_time(self) -> None:
        """Raise ExtractionError once the deadline has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ExtractionError(
                f"Extraction stopped after {self.seconds:g} s, the time limit per document: "
                "the file is too large or too complex; split it or simplify it."
            )


@dataclass(frozen=True)
class Block:
    text: str
    # 0 for body text, 1-6 for headings; a heading without text ends the sections of its
    # level and deeper (what follows belongs to the section above: text after a <dl> whose
    # terms were headings).
    level: int
    start: int
    end: int


_SPACES = re.compile(r"\s+")
_LINE_SPACES = re.compile(r"[^\S\n]+")
# What an extractor puts where it joins pieces of text itself (the edge of an HTML block
# element or a <br>, between two PDF text runs), as opposed to whitespace the source has.
# `Extracted.add` turns it into a space, or drops it before punctuation (below). A C0
# control (and whitespace to `\s`), so the text never keeps one.
_JOIN = "\x1f"
# A run of whitespace, and the token after it when that is punctuation only ("." "," ")."):
# there a space we inserted goes ("word" + "." from two PDF runs is "word."). A space the
# source has stays ("git add .", "given . as", "SQLite :memory:"), and so does any space
# before a token that merely starts with punctuation (".gitconfig", "./configure", "../a").
_GAP = re.compile(r"\s+(?=([.,;:!?)]+(?:\s|$))?)")
# C0 controls other than tab/newline/CR (PostgreSQL text cannot hold NUL) and U+FFFD; _JOIN
# is left to `Extracted.add`.
_CONTROL = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 31), 127, 0xFFFD])


def _gap(match: re.Match) -> str:
    """One space for a run of whitespace; none where we joined text before punctuation."""
    return "" if match.group(1) is not None and _JOIN in match.group() else " "


class Extracted:
    """Text and blocks of a document, built in linear time (parts joined once, on demand)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.blocks: list[Block] = []
        self.limits = limits or Limits()
        self._parts: list[str] = []
        self._length = 0
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self._parts)
            self._parts = [self._text] if self._text else []
        return self._text

    def add(self, text: str, level: int = 0, *, keep_lines: bool = False) -> None:
        """Append a block (whitespace collapsed), separated from the previous by a blank line.

        `text` may hold `_JOIN` where the extractor joined pieces: a space, or nothing before
        punctuation. Whitespace of the source stays (one space for a run of it).

        With `keep_lines` (preformatted code) the line breaks stay and each line keeps its
        indentation (`_code_lines`). Raise ExtractionError when the text would pass the
        character limit or the deadline has passed."""
        self.limits.check_time()
        text = text.translate(_CONTROL)
        text = _code_lines(text.replace(_JOIN, " ")) if keep_lines else _GAP.sub(_gap, text).strip()
        if not text:
            return
        separator = "\n\n" if self._length else ""
        start = self._length + len(separator)
        end = start + len(text)
        if end > self.limits.max_chars:
            raise ExtractionError(
                f"The file holds more than {self.limits.max_chars:,} characters of text, the "
                "limit per document; split it into smaller documents."
            )
        if separator:
            self._parts.append(separator)
        self._parts.append(text)
        self._length = end
        self._text = None
        self.blocks.append(Block(text=text, level=level, start=start, end=end))

    def end_sections(self, level: int) -> None:
        """End the sections of `level` and deeper (an empty heading block, no text)."""
        self.blocks.append(Block(text="", level=level, start=self._length, end=self._length))


# A code line's indentation is kept up to this many columns past the block's shared
# indentation (a deeper one is clamped: spaces are not content, and a hostile page could
# pad every line with megabytes of them).
MAX_INDENT = 40


def _code_lines(text: str) -> str:
    """A code block's lines: blank lines and trailing spaces dropped, the rest of each line's
    spaces collapsed, its indentation kept (a tab as four columns) less the indentation all
    its lines share, at most MAX_INDENT columns. Python's meaning is in its indentation."""
    lines = []
    for raw in text.splitlines():
        body = _LINE_SPACES.sub(" ", raw).strip()
        if body:
            lead = raw[: len(raw) - len(raw.lstrip())]
            lines.append((len(lead) + 3 * lead.count("\t"), body))
    shared = min((indent for indent, _ in lines), default=0)
    return "\n".join(" " * min(indent - shared, MAX_INDENT) + body for indent, body in lines)


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
    """Extract text and blocks; raise ExtractionError when there is no text to index or the
    file passes one of `limits`."""
    limits = limits or Limits()
    if content_type == PDF:
        result = _extract_pdf(data, limits)
    else:
        text = _decode(data)
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


# --------------------------------------------------------------------------- PDF


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


# --------------------------------------------------------------------------- HTML

# The tag an element read as removed gets (renaming is O(1); detaching one of many siblings
# costs a scan of them, quadratic over a paragraph of thousands of marks).
_REMOVED = "supportbot-removed"
_HTML_DROP = [
    _REMOVED,
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
_HTML_BLOCKS = {"p", "dt", "pre", "figcaption", "caption", "tr"}
# Elements that hold inline text (then they are one block) or blocks of their own, which stay
# apart: the paragraphs and listings of an AsciiDoc or DocBook <dd> or <li>.
_HTML_FLOW = {"li", "dd", "blockquote"}
_HTML_BLOCK_CHILDREN = {"p", "div", "pre", "ul", "ol", "dl", "table", "blockquote", "section"}
# A labelled list (<dl>) most of whose terms ask a question or head a definition of two
# blocks or more (paragraphs, listings) is a list of sections, each term a heading one level
# below the enclosing one: the gitfaq questions, giteveryday's examples. Other lists stay
# body text: a glossary, and terms defined in one paragraph however long (counting 40 words
# as long made the Debian FAQ's "Freedom:" ... six sections, whose chunks then outranked
# the entry on how to pronounce Debian). Deciding per list keeps a short term from being
# filed under the long one before it.
# Admonition boxes whose title is a heading (DocBook: <div class="note"><h3>Note</h3>): the
# title labels the box's first paragraph ("Note: ...") and heads no section.
_ADMONITIONS = {"note", "tip", "warning", "important", "caution"}
_HTML_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_CHROME = re.compile(
    r"\b(nav|navbar|menu|breadcrumbs?|cookie|footer|sidebar|sphinxsidebar|skip-link|headerlink)\b",
    re.I,
)
# Whole class or id tokens of generated tables of contents and navigation bars (DocBook
# "toc", "navheader", "navfooter"; Sphinx "toctree-wrapper"). Whole tokens only: Sphinx
# wraps heading text in <a class="toc-backref">, which is content.
_CHROME_TOKENS = {"toc", "navheader", "navfooter", "toctree-wrapper"}
# A docutils `.. contents::` block (Sphinx before docutils 0.18: <div class="contents local
# topic">; later ones write a <nav>, dropped anyway): the page's list of its own questions.
# Both tokens, never "contents" alone: Doxygen's <div class="contents"> is the page body.
_LOCAL_CONTENTS = {"contents", "topic"}
# Permalink anchors documentation generators put after headings ("¶", "#", "§").
_PERMALINK_TEXT = {"¶", "#", "§", "🔗"}


# Footnote references and their back-links ("also supported. [6]", "a limit [*]"): in a
# quote they read as one of our citation marks. Sphinx and Python-Markdown mark them by role
# or class, GitHub by a data attribute, DocBook only by a <sup> mark linking into the page.
_FOOTNOTE_ROLES = {"doc-noteref", "doc-backlink"}
_FOOTNOTE_CLASSES = {"footnote-reference", "footnote-ref", "footnote", "footnote-backref"}
_FOOTNOTE_DATA = ("data-footnote-ref", "data-footnote-backref")
_FOOTNOTE_MARK = re.compile(r"^\[?\s*(?:\d{1,3}|[a-z]|[*†‡§¶#↩]+)\s*\]?$")


_CLOSES_UP = re.compile(r"^[,.;:!?)\]]")


def _in_page(link) -> bool:
    """Whether an element is a link to a place on the same page."""
    return link.tag == "a" and (link.get("href") or "").startswith("#")


def _detach(nodes: list, join) -> None:
    """Remove sibling nodes (in order, one parent) and their text, keeping the last one's
    tail: `join(text before the first, that tail)` takes their place. The nodes stay in the
    tree as `_REMOVED` (read as nothing): detaching one of many siblings scans them, which
    made thousands of marks in one paragraph quadratic."""
    first, holder = nodes[0], nodes[0].getparent()
    previous = first.getprevious()
    before = (previous.tail if previous is not None else holder.text) or ""
    joined = join(before, nodes[-1].tail or "")
    for node in nodes:
        node.tag = _REMOVED
        node.tail = None
    if previous is not None:
        previous.tail = joined
    else:
        holder.text = joined


def _closing_up(before: str, tail: str) -> str:
    """Text on either side of a removed mark: no space left before punctuation, one space
    where both sides had one."""
    if _CLOSES_UP.match(tail.lstrip()):
        return before.rstrip() + tail.lstrip()
    if before[-1:].isspace() and tail[:1].isspace():
        return before + tail.lstrip()
    return before + tail


def _footnote_mark(link) -> bool:
    """Whether an <a> is a footnote reference or back-link (in-page, a mark for its text)."""
    if not _in_page(link):
        return False
    # The text decides first: Sphinx also marks a heading's link back to the page's table
    # of contents as role="doc-backlink", and that text is the heading.
    if not _FOOTNOTE_MARK.match("".join(link.itertext()).strip()):
        return False
    if link.get("role") in _FOOTNOTE_ROLES or any(a in link.attrib for a in _FOOTNOTE_DATA):
        return True
    if not _FOOTNOTE_CLASSES.isdisjoint((link.get("class") or "").split()):
        return True
    parent = link.getparent()
    return (parent is not None and parent.tag == "sup") or any(c.tag == "sup" for c in link)


def _footnote_marks_remove(root, limits: Limits) -> None:
    """Take footnote marks out of the tree, with a <sup> that holds nothing else, and close
    the space a mark leaves before punctuation ("sooner [†], or" -> "sooner, or")."""
    marks = [a for a in root.iter("a") if _footnote_mark(a)]
    limits.check_time()
    for link in marks:
        parent = link.getparent()
        sup_of_mark = (
            parent is not None
            and parent.tag == "sup"
            and len(parent) == 1
            and not (parent.text or "").strip()
            and not (link.tail or "").strip()
        )
        node = parent if sup_of_mark else link
        if node.tag != _REMOVED:
            _detach([node], _closing_up)


# Struck-out text (<del>, <s>, <strike>) is no longer true: an old price, a defunct link.
_STRUCK = ("del", "s", "strike")


def _visible_chars(text: str) -> int:
    return len(text) - sum(c.isspace() for c in text)


def _struck_remove(root, limits: Limits) -> None:
    """Take struck-out text out of the text read from the tree. Where
    it is all the text of its block (an entry struck out as obsolete: its heading, its link
    in the contents) it stays, so the block keeps its text."""
    struck = [
        e for e in root.iter(*_STRUCK) if not any(a.tag in _STRUCK for a in e.iterancestors())
    ]
    limits.check_time()
    by_block: dict = {}
    for element in struck:
        block = next((a for a in element.iterancestors() if a.tag in _HTML_BREAKING), root)
        by_block.setdefault(block, []).append(element)
    for block, elements in by_block.items():
        limits.check_time()
        rest = _visible_chars("".join(block.itertext())) - sum(
            _visible_chars("".join(e.itertext())) for e in elements
        )
        if rest > 0:
            for element in elements:
                element.tag = _REMOVED  # dropped where it is read, its tail kept (linear)


_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
_HTML_CONTAINERS = {"div", "section", "ul", "ol", "dl", "table", "tbody", "thead"}
_DROP_ROLES = {"navigation", "banner", "contentinfo", "search"}
_HTML_CHECK_EVERY = 4096  # elements between deadline checks


def _html_dropped(element) -> bool:
    """Whether an element is page chrome (or not an element: comments, instructions)."""
    tag = element.tag
    if not isinstance(tag, str):
        return True
    if tag in _HTML_DROP:
        return True
    if element.get("role") in _DROP_ROLES or element.get("aria-hidden") == "true":
        return True
    if tag in ("main", "article", "body"):
        return False
    if tag == "a" and len(element) == 0 and (element.text or "").strip() in _PERMALINK_TEXT:
        return True
    marker = f"{element.get('class') or ''} {element.get('id') or ''}"
    if not marker.strip():
        return False
    tokens = set(marker.split())
    if tokens >= _LOCAL_CONTENTS:
        return True
    return bool(_CHROME.search(marker)) or not _CHROME_TOKENS.isdisjoint(tokens)


# Elements that break a line where they start and end (text on either side is not one word).
_HTML_BREAKING = {
    *_HTML_HEADINGS,
    "p", "li", "dt", "dd", "pre", "blockquote", "figcaption", "caption", "tr", "td", "th",
    "div", "section", "ul", "ol", "dl", "table", "tbody", "thead", "br", "hr",
}  # fmt: skip


def _html_text(element, limits: Limits) -> str:
    """The element's visible text as a browser lays it out: inline strings joined as they
    are ("<code>os</code>.remove" stays "os.remove"), `_JOIN` where a block element starts
    or ends (no recursion). Line breaks are kept for `keep_lines` callers."""
    strings: list[str] = []
    stack: list = [element]
    seen = 0
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
            continue
        if _html_dropped(item):
            continue
        seen += 1
        if item is not element and item.tag in _HTML_BREAKING:
            strings.append("\n" if item.tag == "br" else _JOIN)
            stack.append(_JOIN)
        _push_children(stack, item)
        if seen % _HTML_CHECK_EVERY == 0:
            limits.check_time()
    return "".join(strings)


def _plain_text(element, limits: Limits) -> str:
    """The element's visible text on one line (spaces and `_JOIN`s one space), stripped."""
    return _SPACES.sub(" ", _html_text(element, limits)).strip()


def _below(level: int) -> int:
    """The level of a section heading found under a heading of `level` (0: none yet)."""
    return min(max(level, 1) + 1, 6)


def _push_children(stack: list, element, wrap=None) -> None:
    """Push the element's text and children (each followed by its tail) in reverse order;
    `wrap(child)` gives the items read in a child's place (in reading order)."""
    for child in reversed(element):
        if child.tail:
            stack.append(child.tail)
        if wrap is None:
            stack.append(child)
        else:
            stack.extend(reversed(wrap(child)))
    if element.text and isinstance(element.tag, str):
        stack.append(element.text)


@dataclass(frozen=True)
class _Label:
    """Put `text` before the next paragraph read ("" clears it): "Note: ", "<1> "."""

    text: str


@dataclass(frozen=True)
class _Term:
    """A <dt> that heads its definition as a section of `level`."""

    element: object
    level: int


@dataclass(frozen=True)
class _EndSections:
    """The end of a list of sections: what follows belongs to the section above `level`."""

    level: int


# A term longer than this stays a paragraph of its own rather than labelling its definition.
TERM_LABEL_MAX_CHARS = 200
TERM_ALIAS_MAX_CHARS = 60
_ENDS_PHRASE = re.compile(r"[.:;?!\u2014-]$")


def _term_labels(dl, limits: Limits) -> dict:
    """The terms of a labelled list that is body text (a glossary, options, settings), as
    labels of their definitions: each <dd> maps to its run of terms ("-E, --tabstospaces: "),
    each <dt> so used to None (read as the label only). A term with no definition after it,
    an empty one or a long one, is not in the map and stays a paragraph of its own."""
    labels: dict = {}
    run: list = []
    for child in dl:
        if not isinstance(child.tag, str) or _html_dropped(child):
            continue
        if child.tag == "dt":
            run.append(child)
            continue
        if child.tag == "dd" and run and any(s.strip() for s in child.itertext()):
            texts = [_plain_text(t, limits) for t in run]
            # terms before the last name the same thing ("-E", "--tabstospaces") only when
            # all are short: a long one is a term that holds its own description
            if any(len(t) > TERM_ALIAS_MAX_CHARS for t in texts[:-1]):
                run, texts = run[-1:], texts[-1:]
            text = ", ".join(t for t in texts if t)
            if text and len(text) <= TERM_LABEL_MAX_CHARS:
                labels[child] = text if _ENDS_PHRASE.search(text) else text + ":"
                labels.update(dict.fromkeys(run))
        run = []
    return labels


def _dl_is_sections(dl, limits: Limits) -> bool:
    """Whether most terms of the list ask a question or head a definition of two blocks."""
    entries = heads = 0
    term = None
    for child in dl:
        if child.tag == "dt":
            term = child
        elif child.tag == "dd" and term is not None:
            entries += 1
            question = _plain_text(term, limits).endswith("?")
            heads += question or _blocks(child) >= 2
            term = None
    return heads * 2 > entries


# A paragraph that is one bold phrase asking a question heads the answer after it, one level
# below the enclosing heading: FAQs written without heading tags ("<p><b>(1) How do I create
# an AUTOINCREMENT field?</b></p>" and the answer in a <blockquote>, SQLite). Among three or
# more such paragraphs of one parent, most of them questions, the others head sections too
# ("(7) How do I list all tables/indices contained in an SQLite database", no question mark).
_BOLD = {"b", "strong"}
QUESTION_HEADING_MAX_CHARS = 300


def _bold_text(p, limits: Limits) -> str | None:
    """The text of a paragraph that is one bold element, or None."""
    children = [c for c in p if isinstance(c.tag, str)]
    if len(children) != 1 or children[0].tag not in _BOLD:
        return None
    if (p.text or "").strip() or (children[0].tail or "").strip():
        return None
    text = _plain_text(children[0], limits)
    return text if 0 < len(text) <= QUESTION_HEADING_MAX_CHARS else None


# "Q: Do you ship abroad?" / "Question: …?" paragraphs (the answer after them, often "A: …").
_ASKED = re.compile(r"^(?:Q|Question)\s*[:.]\s+(?=\S)", re.I)


def _bold_question(p, limits: Limits, questions_of: dict) -> str | None:
    """The heading a bold paragraph or a "Q: …?" paragraph makes (see above), or None.
    `questions_of` caches, per parent, whether its bold paragraphs are a list of questions."""
    # the visible text is only read when a piece of it opens with Q (most paragraphs: none)
    may_ask = any(t.lstrip()[:1] in ("Q", "q") for t in p.itertext())
    plain = _plain_text(p, limits) if may_ask else ""
    if plain.endswith("?") and len(plain) <= QUESTION_HEADING_MAX_CHARS and _ASKED.match(plain):
        return _ASKED.sub("", plain, count=1)
    text = _bold_text(p, limits)
    if text is None or text.endswith(":"):
        return None
    if text.endswith("?"):
        return text
    parent = p.getparent()
    if parent not in questions_of:
        bold = [t for c in parent if c.tag == "p" and (t := _bold_text(c, limits)) is not None]
        asked = sum(t.endswith("?") for t in bold)
        questions_of[parent] = len(bold) >= 3 and asked * 2 > len(bold)
    return text if questions_of[parent] else None


def _summary(details):
    """The <summary> of a <details> that heads its entry: one with text and no heading
    element inside (a heading there heads the entry itself)."""
    first = next((c for c in details if isinstance(c.tag, str)), None)
    if first is None or first.tag != "summary" or not "".join(first.itertext()).strip():
        return None
    return None if any(e.tag in _HTML_HEADINGS for e in first.iter()) else first


def _local_contents(element) -> bool:
    """Is a list only links to places on the same page (a page's list of its own questions
    or sections, written without the class names `_html_dropped` knows)?"""
    items = [c for c in element if isinstance(c.tag, str)]
    if len(items) < 3 or any(c.tag != "li" for c in items):
        return False
    for item in items:
        links = [a for a in item.iter("a") if _in_page(a)]
        linked = "".join("".join(a.itertext()) for a in links)
        if not links or _SPACES.sub("", "".join(item.itertext())) != _SPACES.sub("", linked):
            return False
    return True


_LINK_RUN_GLUE = re.compile(r"^[\s|•·]*$")
LINK_RUN_MIN = 3


def _link_runs_remove(root, limits: Limits) -> None:
    """Take out runs of links into the same page set one to a line with <br> (a page's own
    contents written without a list: the Fetchmail FAQ's). Three or more such links with
    nothing but spaces or separators between them; a run inside a sentence stays."""
    parents = [e for e in root.iter() if isinstance(e.tag, str) and len(e)]
    limits.check_time()
    for parent in parents:
        run: list = []
        runs: list[list] = []
        for child in parent:
            in_page = _in_page(child)
            if (in_page or child.tag == "br") and _LINK_RUN_GLUE.match(child.tail or ""):
                run.append(child)
                continue
            if in_page:  # the last link of a run may be followed by text: it ends the run
                run.append(child)
            runs.append(run)
            run = []
        runs.append(run)
        for found in runs:
            while found and found[0].tag == "br":
                found = found[1:]  # the break before the run keeps what precedes on its line
            links = [c for c in found if c.tag == "a"]
            if len(links) < LINK_RUN_MIN:
                continue
            _detach(found, str.__add__)


def _blocks(element) -> int:
    return sum(
        1
        for c in element
        if isinstance(c.tag, str) and c.tag in _HTML_BLOCK_CHILDREN and not _html_dropped(c)
    )


def _admonition_title(div):
    """The heading that titles an admonition box, or None."""
    if _ADMONITIONS.isdisjoint((div.get("class") or "").split()):
        return None
    first = next((c for c in div if isinstance(c.tag, str)), None)
    return first if first is not None and first.tag in _HTML_HEADINGS else None


_CALLOUT = re.compile(r"\s*<(\d+)>")


def _callout_labels(ol, limits: Limits) -> dict:
    """The items of an AsciiDoc callout list (<div class="colist"><ol>) and what goes before
    each: its number and the listing line that carries the number, "<2> $ git branch
    --no-merged master — ", so an explanation reads with its command. Only the list that
    opens its <div> reads the listing before it: each listing is read once more at most."""
    parent = ol.getparent()
    if parent is None or "colist" not in (parent.get("class") or "").split():
        return {}
    if next((c for c in parent if isinstance(c.tag, str)), None) is not ol:
        return {}
    commands: dict[str, str] = {}
    listing = parent.getprevious()
    while listing is not None and not isinstance(listing.tag, str):
        listing = listing.getprevious()
    pre = listing.find(".//pre") if listing is not None else None
    if pre is not None:
        for line in _html_text(pre, limits).splitlines():
            command = _SPACES.sub(" ", _CALLOUT.sub("", line)).strip()
            for number in _CALLOUT.findall(line):
                commands.setdefault(number, command)
    items = [c for c in ol if c.tag == "li"]
    labels = {}
    for n, item in enumerate(items, start=1):
        command = commands.get(str(n))
        labels[item] = f"<{n}> {command} — " if command else f"<{n}> "
    return labels


def _html_root(document):
    """<main>, else <article>, else the element with role="main", else <body>: the first
    that is not inside page chrome."""
    for name in ("main", "article"):
        for candidate in document.iter(name):
            if not any(_html_dropped(e) for e in (candidate, *candidate.iterancestors())):
                return candidate
            break
    for candidate in document.iterfind(".//*[@role='main']"):
        if not any(_html_dropped(e) for e in (candidate, *candidate.iterancestors())):
            return candidate
        break
    body = document.find("body")
    return body if body is not None else document


def _extract_html(html: str, limits: Limits) -> Extracted:
    """Headings and blocks of the main content, in document order.

    A <dt> of a list of sections (`_dl_is_sections`) is a heading, and the list's end ends
    its sections; <li>, <dd> and <blockquote> holding paragraphs or listings keep them apart;
    an admonition's title and a callout's number (and command) open its first paragraph.

    Parsed by libxml2 (lxml), which builds at most HTML_MAX_DEPTH levels; deeper nesting fails
    the document. The tree is walked with an explicit stack, each node visited once (a
    list's terms and a callout list's listing are read once more before)."""
    parser = etree.HTMLParser(remove_comments=True, remove_pis=True, no_network=True)
    # XHTML (DocBook, many generators) opens with an XML declaration naming its encoding,
    # which lxml refuses on text that is already decoded.
    html = _XML_DECLARATION.sub("", html, count=1)
    document = etree.fromstring(html, parser) if html.strip() else None
    for entry in parser.error_log:
        if entry.type_name == "ERR_RESOURCE_LIMIT":
            reason = entry.message.split(", use XML_PARSE_HUGE")[0].strip().rstrip(".")
            raise ExtractionError(
                f"The HTML is too deeply nested or too large to read safely "
                f"(at most {HTML_MAX_DEPTH} levels of elements): {reason}."
            )
    result = Extracted(limits)
    if document is None:
        return result
    limits.check_time()
    root = _html_root(document)
    _footnote_marks_remove(root, limits)
    _struck_remove(root, limits)
    _link_runs_remove(root, limits)
    title_element = document.find("head/title")
    title = _html_text(title_element, limits) if title_element is not None else ""
    # (text, level); level -1: preformatted; (None, level): the end of a list's sections
    entries: list[tuple[str | None, int]] = []
    inline: list[str] = []
    has_h1 = False
    label = ""  # put before the next paragraph
    section = 0  # the level of the section being read
    headed = 0  # the level of the last heading element or list term (not a bold question)
    questions_of: dict = {}  # parent element -> are its bold paragraphs a list of questions

    def add(text: str, level: int) -> None:
        nonlocal label
        if level == 0 and not text.replace(_JOIN, "").strip():
            return  # nothing visible (what removed links left): a heading above is over nothing
        if label and level == 0:
            text = label + text
        elif label:  # a listing or heading comes first: the label is a paragraph of its own
            entries.append((label.rstrip(" :—"), 0))
        label = ""
        entries.append((text, level))

    def flush() -> None:
        if "".join(inline).strip():
            add("".join(inline), 0)
        inline.clear()

    flush_marker = object()
    stack: list = []
    _push_children(stack, root)
    visited = 0
    while stack:
        item = stack.pop()
        if item is flush_marker:
            flush()
            continue
        if isinstance(item, str):
            inline.append(item)
            continue
        if isinstance(item, _Label):
            flush()
            label = item.text
            continue
        if isinstance(item, _EndSections):
            flush()
            entries.append((None, item.level))
            section = headed = item.level - 1
            continue
        if isinstance(item, _Term):
            flush()
            add(_html_text(item.element, limits), item.level)
            section = headed = item.level
            continue
        visited += 1
        if visited % _HTML_CHECK_EVERY == 0:
            limits.check_time()
        if _html_dropped(item):
            continue
        name = item.tag
        if name in _HTML_HEADINGS:
            has_h1 = has_h1 or name == "h1"
            flush()
            add(_html_text(item, limits), _HTML_HEADINGS[name])
            section = headed = _HTML_HEADINGS[name]
        elif name == "p" and (question := _bold_question(item, limits, questions_of)):
            flush()
            section = _below(headed)
            add(question, section)
        elif name in ("ul", "ol") and _local_contents(item):
            continue
        elif name == "details" and (summary := _summary(item)) is not None:
            # an accordion entry (<details><summary>question</summary>answer</details>): its
            # summary heads the answer, one level below the enclosing heading
            flush()
            level = _below(headed)
            stack.append(_EndSections(level))
            _push_children(
                stack, item, lambda c, t=summary, lv=level: [_Term(c, lv)] if c is t else [c]
            )
        elif name in _HTML_FLOW and _blocks(item):
            flush()
            stack.append(flush_marker)
            _push_children(stack, item)
        elif name in _HTML_BLOCKS or name in _HTML_FLOW:
            has_h1 = has_h1 or any(True for _ in item.iter("h1"))
            flush()
            cells = _html_cells(item) if name == "tr" else []
            texts = [_plain_text(c, limits) for c in cells]
            if cells and not any(texts):
                continue  # a row of empty cells (layout tables of navigation bars)
            text = " | ".join(texts) if cells else _html_text(item, limits)
            add(text, -1 if name == "pre" else 0)
        elif name == "br":
            inline.append(_JOIN)
        elif name == "dl" and _dl_is_sections(item, limits):
            flush()
            level = _below(section)
            stack.append(_EndSections(level))
            _push_children(
                stack, item, lambda c, level=level: [_Term(c, level) if c.tag == "dt" else c]
            )
        elif name == "dl" and (terms := _term_labels(item, limits)):
            # a glossary or list of options: each term opens its definition's first paragraph
            flush()
            stack.append(flush_marker)
            _push_children(
                stack,
                item,
                lambda c, t=terms: (
                    []
                    if c in t and t[c] is None
                    else [_Label(t[c] + " "), c, _Label("")]
                    if c in t
                    else [c]
                ),
            )
        elif name in _HTML_CONTAINERS:
            flush()
            stack.append(flush_marker)
            box_title = _admonition_title(item) if name == "div" else None
            callouts = _callout_labels(item, limits) if name == "ol" else {}
            if box_title is not None:
                stack.append(_Label(""))
                _push_children(stack, item, lambda c, t=box_title: [] if c is t else [c])
                heading = _plain_text(box_title, limits)
                stack.append(_Label(f"{heading}: " if heading else ""))
            elif callouts:
                _push_children(
                    stack,
                    item,
                    lambda c, n=callouts: [_Label(n[c]), c, _Label("")] if c in n else [c],
                )
            else:
                _push_children(stack, item)
        else:
            _push_children(stack, item)
    flush()
    if title and not has_h1:
        result.add(title, level=1)
    for i, (text, level) in enumerate(entries):
        following = entries[i + 1][1] if i + 1 < len(entries) else 0
        if level > 0 and 0 < following <= level:
            continue  # a heading over nothing (a site title above the page's own h1)
        if text is None:
            if i + 1 < len(entries):  # text follows the list of sections
                result.end_sections(level)
        else:
            result.add(text, level=max(level, 0), keep_lines=level < 0)
    return result


def _html_cells(row) -> list:
    """The row's outermost td/th cells that are not page chrome."""
    cells = []
    stack = list(reversed(row))
    while stack:
        element = stack.pop()
        if _html_dropped(element):
            continue
        if element.tag in ("td", "th"):
            cells.append(element)
        else:
            stack.extend(reversed(element))
    return cells


# --------------------------------------------------------------------------- Markdown

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
