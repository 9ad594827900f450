"""Content types, limits, versions and the text-and-blocks result every extractor builds."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

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
# The version of each format's extractor, bumped whenever what it produces changes; documents an
# older one made are re-indexed (`services.documents_reextract_outdated`, daily and `manage.py
# reindex_outdated`), and only those: a change to HTML extraction never re-embeds a tenant's PDFs.
# HTML 1: inline text joined as laid out (no spaces inside "os.remove"), code blocks keep their
# lines, permalink anchors dropped, role="main" root; 2: headings over nothing (a site title above
# the page's h1) dropped; 3: XHTML with an XML declaration reads (it failed before); 4: a docutils
# local table of contents (<div class="contents topic">) dropped; 5: the source's spaces before
# punctuation kept ("git add ."), the paragraphs and listings of a <dd> or <li> kept apart, the
# terms of a list of sections (gitfaq) headings, an admonition's heading a label, callouts
# numbered with their command. 6: code lines keep their indentation. 7: FAQ entries without
# heading tags head their answers (a paragraph of one bold question, a "Q: …?" paragraph, an
# accordion's <summary>), and a list of nothing but links into the same page is dropped (the
# page's list of its own questions). 8: footnote references and back-links ("[6]", "[*]") dropped.
# 9: a run of three or more links into the page one to a line (<br>), a contents without a list,
# dropped. 10: the terms of a glossary or list of options open their definition's first paragraph
# ("-E, --tabstospaces: Convert each typed tab to spaces"), and a heading over nothing but removed
# links (a contents' section titles) is dropped. 11: struck-out text (<del>, <s>, <strike>: an old
# price, a defunct link) dropped unless it is all of its block's text (an entry struck out as
# obsolete keeps its heading). 12: questions marked only by their place head their answers
# (`questions`): "Q: …?<br>A: …" in one paragraph split in two, and paragraphs or divs that only
# ask, each over its answer, when a page has three of them (no page of the ten sets changed).
# 13: a paragraph that is only an admonition label ("Note:" over a CUPS note, Sphinx's "Note",
# "Warning" and "See also" titles) opens the paragraph after it (`questions.labels_joined`).
# 14: a heading that only names a part of the entry above it ("Symptom", "Cause", "Solution",
# "Workaround" …) labels that part inside the entry's section (`questions.parts_as_labels`).
# 15: class names read in any case (old DocBook stylesheets write CLASS="NAVHEADER": the
# navigation bars were kept), a table of one cell read as the blocks it holds (DocBook's grey
# box around a listing: the listing was one run-on line), and a list item that opens with a
# paragraph of only an emphasised term labels the paragraph after it ("--no-daemon: Don't …").
# 16: a table row whose leading cells are blank takes them from the row above (a table grouping
# its rows names the group once: "| 3.0.32 | Windows XP" read "Windows | 3.0.32 | Windows XP").
# 17: an admonition boxed beside its icon (Asciidoctor: a one-row table of an icon cell and the
# content) reads as its content labelled by the icon's word ("Note: …", it read "| …"), and an
# Asciidoctor header's byline (author, e-mail, revision) is dropped.
# Markdown 1: fenced and indented code keeps its lines and their indentation (it was one collapsed
# line). Markdown 2: raw HTML read, not dropped (a `<details>` summary heads the answer after it,
# a `<br>` breaks the line), FAQ questions as paragraphs head their answers (`questions`: "**How
# do I …?**" over its answer, three to a page; "Q: …? A: …"); a hard line break no longer glues
# two words. Markdown 3: a label paragraph opens the next one, as HTML 13. Markdown 4: part
# headings label their parts, as HTML 14.
# Plain text 1: a title underlined (or over- and underlined, reStructuredText) with any
# repeated mark of = - ~ ^ * + # " ' ` : . _ is a heading (only = and - were, and any run of
# them). Plain text 2 (`plain`): numbered titles, FAQ questions ("Q: …", a short line asking over
# its answer) are headings; list items are blocks of their own; lines indented three columns
# deeper than their prose keep their line breaks (code); decoration lines and a table of contents
# are dropped. Plain text 3: a list item's wrapped lines under a hanging indent (left of the
# item's text, right of its mark) stay in the item (the zsh FAQ's steps were cut after their first
# line). Plain text 4: a numbered title is dropped as the contents' line only when a later one has
# its number and words (the CVS FAQ's numbers restart in each category: all but the last "1." lost
# their title); an indented paragraph whose short last line ends a sentence reads as prose,
# comment lines as code. PDF 1: a text layer whose words run together (CID fonts: the spaces are
# only offsets) is read by glyph positions (`pdf_layout`, pdfminer.six); page numbers, running
# headers and footers and a table of contents with dot leaders dropped; a title that wraps is one
# heading, a paragraph that goes on over a page break one paragraph (the demo's PDF extracts
# identically). Others: 0, as before versions existed.
# (With HTML 5 a space closes up only before a punctuation-only token and chunks split only at
# sentence ends, for every format: that changed no PDF, Markdown or text passage of the demo, so
# those are not re-embedded for it; a new upload gets it.)
EXTRACTOR_VERSIONS = {HTML: 17, PDF: 1, MARKDOWN: 4, PLAIN: 4}
EXTRACTOR_VERSION = max(EXTRACTOR_VERSIONS.values())


def extractor_version(content_type: str) -> int:
    """The current extractor version of a (detected) content type."""
    return EXTRACTOR_VERSIONS.get(content_type, 0)


# libxml2 stops building the tree at this depth (ERR_RESOURCE_LIMIT); we fail the document.
HTML_MAX_DEPTH = 255


# What an extraction child process may use by default (`sandbox`): address space, and the
# longest line a text or Markdown file may hold (one 10 MiB line is not a help article).
MEMORY_BYTES = 768 * 1024 * 1024
MAX_LINE_CHARS = 200_000
# All the streams of a PDF together may decompress to this many bytes (`guards`), and an image
# may declare at most this many pixels (a 600 dpi A4 scan has 35 million).
PDF_MAX_TOTAL_STREAM_BYTES = 4 * PDF_MAX_STREAM_BYTES
PDF_MAX_IMAGE_PIXELS = 200_000_000


@dataclass(frozen=True)
class Limits:
    """What one document may cost: characters of text, PDF pages, and a wall-clock deadline
    (a `time.monotonic()` value) checked cooperatively while extracting; the input's size, a
    PDF's decompressed streams, an image's pixels and a line's length checked before parsing
    (`guards`); the memory of the child process that extracts it (`sandbox`)."""

    max_chars: int = 20_000_000
    max_pages: int = 2000
    deadline: float | None = None
    seconds: float = 0.0
    max_bytes: int = 64 * 1024 * 1024
    max_stream_bytes: int = PDF_MAX_STREAM_BYTES
    max_total_stream_bytes: int = PDF_MAX_TOTAL_STREAM_BYTES
    max_image_pixels: int = PDF_MAX_IMAGE_PIXELS
    max_line_chars: int = MAX_LINE_CHARS
    memory_bytes: int = MEMORY_BYTES

    @classmethod
    def within(cls, *, seconds: float, **limits: int) -> Limits:
        """Limits whose deadline is `seconds` from now (the other fields as given)."""
        return cls(deadline=time.monotonic() + seconds, seconds=seconds, **limits)

    def check_chars(self, chars: int, *, what: str = "file") -> None:
        """Raise ExtractionError when `chars` characters of text pass the limit."""
        if chars > self.max_chars:
            raise ExtractionError(
                f"The {what} holds more than {self.max_chars:,} characters of text, the limit "
                "per document; split it into smaller documents."
            )

    def check_time(self) -> None:
        """Raise ExtractionError once the deadline has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ExtractionError(self.time_message())

    def time_message(self, *, killed: bool = False) -> str:
        """The document's error when extraction passes the deadline (`killed`: the process
        extracting it did not stop by itself and was killed)."""
        killed_note = " and was killed" if killed else ""
        return (
            f"Extraction stopped after {self.seconds:g} s, the time limit per document: it took "
            f"longer than {self.seconds:g} s{killed_note}. The file is too large or too complex; "
            "split it or simplify it."
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

    @classmethod
    def of(cls, text: str, spans: list[tuple[int, int, int]], limits: Limits) -> Extracted:
        """Rebuild a result from its text and its blocks' (level, start, end) spans (what an
        extraction process sends back: a block's text is the text at its span)."""
        result = cls(limits)
        result._parts = [text] if text else []
        result._length = len(text)
        for level, start, end in spans:
            if not (0 <= start <= end <= len(text)) or not 0 <= level <= 6:
                raise ExtractionError("The extraction process sent back an invalid block.")
            result.blocks.append(Block(text=text[start:end], level=level, start=start, end=end))
        return result

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
        self.limits.check_chars(end)
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
