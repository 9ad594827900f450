"""HTML: the main content's headings and blocks in document order (`_extract_html`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

from knowledge.extraction.base import (
    _JOIN,
    _SPACES,
    HTML_MAX_DEPTH,
    Extracted,
    ExtractionError,
    Limits,
)
from knowledge.extraction.html_tree import (
    _HTML_CHECK_EVERY,
    _HTML_HEADINGS,
    _below,
    _footnote_marks_remove,
    _html_dropped,
    _html_root,
    _html_text,
    _link_runs_remove,
    _local_contents,
    _plain_text,
    _push_children,
    _struck_remove,
    classes,
)
from knowledge.extraction.questions import labels_joined, parts_as_labels, questions_as_headings

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
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")
_HTML_CONTAINERS = {"div", "section", "ul", "ol", "dl", "table", "tbody", "thead"}


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


# Inline elements a list item's term is set in (DocBook wraps <i> in a <span>).
_TERM_INLINE = {"em", "i", "b", "strong", "code", "tt", "kbd", "samp", "var", "span"}


def _item_term(li, limits: Limits):
    """(paragraph, label) when a list item opens with a paragraph of nothing but one short
    emphasised term over the paragraph that explains it (an option list written as a list:
    <li><p><em>--no-daemon</em></p><p>Don't become a daemon…</p></li>); None otherwise."""
    kids = [c for c in li if isinstance(c.tag, str) and not _html_dropped(c)]
    if len(kids) < 2 or kids[0].tag != "p" or kids[1].tag != "p" or (li.text or "").strip():
        return None
    first = kids[0]
    inner = [c for c in first if isinstance(c.tag, str)]
    if len(inner) != 1 or inner[0].tag not in _TERM_INLINE:
        return None
    if (first.text or "").strip() or (inner[0].tail or "").strip():
        return None
    text = _plain_text(first, limits)
    if not text or len(text) > TERM_ALIAS_MAX_CHARS:
        return None
    return first, text if _ENDS_PHRASE.search(text) else text + ":"


def _box_cell(table):
    """(cell, label) when a table is only a box around one cell's content, to be read as the
    blocks it holds: one row of one cell (the grey frame old DocBook stylesheets put around
    code, a layout frame; no label), or one row of an admonition's icon beside its content
    (Asciidoctor's note, tip and warning boxes: the icon's word labels the first paragraph,
    "Note: "). None for a table of data."""
    rows = [c for c in table if c.tag == "tr"]
    rows += [r for c in table if c.tag in ("thead", "tbody", "tfoot") for r in c if r.tag == "tr"]
    if len(rows) != 1:
        return None
    cells = _html_cells(rows[0])
    if len(cells) == 1 and cells[0].tag == "td":
        return cells[0], ""
    if len(cells) == 2 and cells[1].tag == "td" and (word := _icon_word(cells[0])):
        return cells[1], f"{word}: "
    return None


_ICON_WORDS = _ADMONITIONS | {"danger", "attention", "hint"}


def _icon_word(cell) -> str | None:
    """The admonition word an icon cell shows: its text ("Note"), or, for an icon without
    text, the title or alt text of the icon ("Note", "[Warning]"); None for anything else."""
    text = "".join(cell.itertext()).strip()
    names = [text] if text else [e.get("title") or e.get("alt") or "" for e in cell.iter()]
    for name in names:
        word = name.strip().strip("[]").strip()
        if word.lower() in _ICON_WORDS:
            return word
    return None


def _ditto(texts: list[str], above: list[str] | None) -> list[str]:
    """A row's cells with its empty leading cells taken from the row above: a table that
    groups rows leaves the group's name blank after its first row ("| 3.0.32 | Windows XP"
    under "Windows | 3.0.33 | Windows Vista"), and a row quoted alone must still name it."""
    if not above or len(above) != len(texts) or not texts or texts[0]:
        return texts
    lead = next((i for i, t in enumerate(texts) if t), len(texts))
    if lead == len(texts) or not above[0]:
        return texts
    return above[:lead] + texts[lead:]


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


def _blocks(element) -> int:
    return sum(
        1
        for c in element
        if isinstance(c.tag, str) and c.tag in _HTML_BLOCK_CHILDREN and not _html_dropped(c)
    )


def _admonition_title(div):
    """The heading that titles an admonition box, or None."""
    if _ADMONITIONS.isdisjoint(classes(div)):
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
    if parent is None or "colist" not in classes(parent):
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


def _extract_html(html: str, limits: Limits) -> Extracted:
    """Headings and blocks of the main content, in document order.

    A <dt> of a list of sections (`_dl_is_sections`) is a heading, and the list's end ends
    its sections; <li>, <dd> and <blockquote> holding paragraphs or listings keep them apart;
    an admonition's title and a callout's number (and command) open its first paragraph.

    Parsed by libxml2 (lxml), which builds at most HTML_MAX_DEPTH levels; deeper nesting fails
    the document. The tree is walked with an explicit stack, each node visited once (a
    list's terms and a callout list's listing are read once more before); each element is
    read by its tag's handler in `_ELEMENT_HANDLERS`."""
    document = _html_parse(html)
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
    walk = _Walk(limits)
    walk.read(root)
    if title and not walk.has_h1:
        result.add(title, level=1)
    _entries_add(result, walk.entries)
    return result


def _html_parse(html: str):
    """The document tree of `html`, None for blank text; raise ExtractionError when libxml2
    stopped at its nesting or size limit."""
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
    return document


def _entries_add(result: Extracted, entries: list[tuple[str | None, int]]) -> None:
    """Add the collected entries to `result`, FAQ questions and part headings read first
    (`questions`); a heading over nothing is dropped, and a list's end of sections is kept
    only when text follows it."""
    entries = labels_joined(parts_as_labels(questions_as_headings(entries)))
    for i, (text, level) in enumerate(entries):
        following = entries[i + 1][1] if i + 1 < len(entries) else 0
        if level > 0 and 0 < following <= level:
            continue  # a heading over nothing (a site title above the page's own h1)
        if text is None:
            if i + 1 < len(entries):  # text follows the list of sections
                result.end_sections(level)
        else:
            result.add(text, level=max(level, 0), keep_lines=level < 0)


@dataclass(frozen=True)
class _Flush:
    """End the paragraph being read (read after the children of a container)."""


_FLUSH = _Flush()


@dataclass
class _Walk:
    """The state of one walk over the tree, shared by the handlers: the stack of items still
    to read, the entries found, and the inline text of the paragraph being read.

    `entries` holds (text, level); level -1 is preformatted, (None, level) the end of a
    list's sections."""

    limits: Limits
    stack: list = field(default_factory=list)
    entries: list[tuple[str | None, int]] = field(default_factory=list)
    inline: list[str] = field(default_factory=list)
    has_h1: bool = False
    label: str = ""  # put before the next paragraph
    section: int = 0  # the level of the section being read
    headed: int = 0  # the level of the last heading element or list term (not a bold question)
    questions_of: dict = field(default_factory=dict)  # parent -> are its bold paragraphs asked
    rows_above: dict = field(default_factory=dict)  # table body -> cell texts of its last row
    visited: int = 0  # elements visited, for the deadline checks

    def read(self, root) -> None:
        """Read the root's children in document order, to the end of the last paragraph."""
        _push_children(self.stack, root)
        while self.stack:
            item = self.stack.pop()
            if isinstance(item, str):
                self.inline.append(item)
            elif (marker := _MARKER_HANDLERS.get(type(item))) is not None:
                marker(self, item)
            else:
                self.element(item)
        self.flush()

    def element(self, element) -> None:
        """Read an element by its tag's handler (one not in the table is inline: its
        children go on the paragraph being read); page chrome is skipped."""
        self.visited += 1
        if self.visited % _HTML_CHECK_EVERY == 0:
            self.limits.check_time()
        if not _html_dropped(element):
            _ELEMENT_HANDLERS.get(element.tag, _inline_read)(self, element)

    def add(self, text: str, level: int) -> None:
        """Add an entry, the pending label before a paragraph (before a listing or heading
        the label is a paragraph of its own); nothing for a paragraph with no visible text."""
        if level == 0 and not text.replace(_JOIN, "").strip():
            return  # nothing visible (what removed links left): a heading above is over nothing
        if self.label and level == 0:
            text = self.label + text
        elif self.label:
            self.entries.append((self.label.rstrip(" :—"), 0))
        self.label = ""
        self.entries.append((text, level))

    def flush(self) -> None:
        """End the paragraph of inline text being read (added when it has any text)."""
        if "".join(self.inline).strip():
            self.add("".join(self.inline), 0)
        self.inline.clear()

    def block_open(self, element) -> None:
        """End the paragraph before a block read as one entry (noting an <h1> inside it)."""
        self.has_h1 = self.has_h1 or any(True for _ in element.iter("h1"))
        self.flush()


# Handlers of the items pushed besides elements and text.


def _flush_read(walk: _Walk, _flush: _Flush) -> None:
    walk.flush()


def _label_read(walk: _Walk, label: _Label) -> None:
    walk.flush()
    walk.label = label.text


def _sections_end(walk: _Walk, end: _EndSections) -> None:
    walk.flush()
    walk.entries.append((None, end.level))
    walk.section = walk.headed = end.level - 1


def _term_read(walk: _Walk, term: _Term) -> None:
    walk.flush()
    walk.add(_html_text(term.element, walk.limits), term.level)
    walk.section = walk.headed = term.level


_MARKER_HANDLERS = {
    _Flush: _flush_read,
    _Label: _label_read,
    _EndSections: _sections_end,
    _Term: _term_read,
}


# Handlers of elements, by tag.


def _inline_read(walk: _Walk, element) -> None:
    """An inline element (or one of no meaning here): its text goes on the paragraph."""
    _push_children(walk.stack, element)


def _container_read(walk: _Walk, element, wrap=None) -> None:
    """A container: its children are read as blocks of their own, ending the paragraph
    before and after them (`wrap` as in `_push_children`)."""
    walk.flush()
    walk.stack.append(_FLUSH)
    _push_children(walk.stack, element, wrap)


def _heading_read(walk: _Walk, heading) -> None:
    walk.has_h1 = walk.has_h1 or heading.tag == "h1"
    walk.flush()
    level = _HTML_HEADINGS[heading.tag]
    walk.add(_html_text(heading, walk.limits), level)
    walk.section = walk.headed = level


def _block_read(walk: _Walk, block) -> None:
    """A block read as one entry: a paragraph, a term, a caption, a listing (its lines
    kept), an item or quote of inline text."""
    walk.block_open(block)
    walk.add(_html_text(block, walk.limits), -1 if block.tag == "pre" else 0)


def _paragraph_read(walk: _Walk, p) -> None:
    """A paragraph, or the question heading the answer after it (`_bold_question`), one
    level below the enclosing heading."""
    question = _bold_question(p, walk.limits, walk.questions_of)
    if not question:
        _block_read(walk, p)
        return
    walk.flush()
    walk.section = _below(walk.headed)
    walk.add(question, walk.section)


def _row_read(walk: _Walk, row) -> None:
    """A table row: its cells joined with " | " (blank leading cells from the row above,
    `_ditto`); a row of empty cells (layout tables of navigation bars) is skipped."""
    walk.block_open(row)
    cells = _html_cells(row)
    if not cells:
        walk.add(_html_text(row, walk.limits), 0)
        return
    texts = [_plain_text(c, walk.limits) for c in cells]
    if not any(texts):
        return
    texts = _ditto(texts, walk.rows_above.get(row.getparent()))
    walk.rows_above[row.getparent()] = texts
    walk.add(" | ".join(texts), 0)


def _flow_read(walk: _Walk, element) -> None:
    """An <li>, <dd> or <blockquote>: one block when it holds inline text only, else its
    paragraphs and listings apart, an item's opening term labelling the paragraph after it
    (`_item_term`)."""
    if not _blocks(element):
        _block_read(walk, element)
        return
    term = _item_term(element, walk.limits) if element.tag == "li" else None
    if term is None:
        _container_read(walk, element)
        return
    paragraph, label = term
    _container_read(walk, element, lambda c: [_Label(label + " ")] if c is paragraph else [c])


def _details_read(walk: _Walk, details) -> None:
    """An accordion entry (<details><summary>question</summary>answer</details>): its
    summary heads the answer, one level below the enclosing heading."""
    summary = _summary(details)
    if summary is None:
        _inline_read(walk, details)
        return
    walk.flush()
    level = _below(walk.headed)
    walk.stack.append(_EndSections(level))
    _push_children(walk.stack, details, lambda c: [_Term(c, level)] if c is summary else [c])


def _list_read(walk: _Walk, ul) -> None:
    """A list; one of nothing but links into the page (its own contents) is dropped."""
    if not _local_contents(ul):
        _container_read(walk, ul)


def _ordered_list_read(walk: _Walk, ol) -> None:
    """An ordered list (see `_list_read`); a callout list's items open with their number
    and command (`_callout_labels`)."""
    if _local_contents(ol):
        return
    callouts = _callout_labels(ol, walk.limits)
    if not callouts:
        _container_read(walk, ol)
        return
    _container_read(
        walk, ol, lambda c: [_Label(callouts[c]), c, _Label("")] if c in callouts else [c]
    )


def _table_read(walk: _Walk, table) -> None:
    """A table; one that only boxes one cell is read as the cell's blocks, an admonition
    icon's word labelling the first paragraph (`_box_cell`)."""
    box = _box_cell(table)
    if box is None:
        _container_read(walk, table)
        return
    walk.flush()
    walk.stack.append(_FLUSH)
    cell, label = box
    walk.label = label  # (as it always has: a label pending before the table is replaced)
    if label:
        walk.stack.append(_Label(""))
    _push_children(walk.stack, cell)
    if label:
        walk.stack.append(_Label(label))


def _labelled_list_read(walk: _Walk, dl) -> None:
    """A <dl>: a list of sections (`_dl_is_sections`), each term a heading one level below
    the section; a glossary or list of options, each term opening its definition's first
    paragraph (`_term_labels`); else a container."""
    if _dl_is_sections(dl, walk.limits):
        walk.flush()
        level = _below(walk.section)
        walk.stack.append(_EndSections(level))
        _push_children(walk.stack, dl, lambda c: [_Term(c, level) if c.tag == "dt" else c])
    elif terms := _term_labels(dl, walk.limits):
        _container_read(walk, dl, lambda c: _term_labelled(c, terms))
    else:
        _container_read(walk, dl)


def _term_labelled(child, terms: dict) -> list:
    """The items read in place of a glossary's child: a term used as a label nothing, a
    definition between its label and the label's end."""
    if child not in terms:
        return [child]
    label = terms[child]
    return [] if label is None else [_Label(label + " "), child, _Label("")]


def _division_read(walk: _Walk, div) -> None:
    """A <div>; an admonition box's title heading labels its first paragraph ("Note: ")."""
    title = _admonition_title(div)
    if title is None:
        _container_read(walk, div)
        return
    walk.flush()
    walk.stack.append(_FLUSH)
    walk.stack.append(_Label(""))
    _push_children(walk.stack, div, lambda c: [] if c is title else [c])
    heading = _plain_text(title, walk.limits)
    walk.stack.append(_Label(f"{heading}: " if heading else ""))


def _break_read(walk: _Walk, _br) -> None:
    walk.inline.append(_JOIN)


_ELEMENT_HANDLERS = {
    **dict.fromkeys(_HTML_CONTAINERS, _container_read),
    **dict.fromkeys(_HTML_BLOCKS, _block_read),
    **dict.fromkeys(_HTML_FLOW, _flow_read),
    **dict.fromkeys(_HTML_HEADINGS, _heading_read),
    # tags read their own way (each falls back to one of the readings above)
    "p": _paragraph_read,
    "tr": _row_read,
    "details": _details_read,
    "ul": _list_read,
    "ol": _ordered_list_read,
    "table": _table_read,
    "dl": _labelled_list_read,
    "div": _division_read,
    "br": _break_read,
}


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
