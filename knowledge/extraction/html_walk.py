"""HTML: the walk over the tree, each element read by its tag's handler (`_ELEMENT_HANDLERS`)
into entries (text, level) in document order."""

from __future__ import annotations

from dataclasses import dataclass, field

from knowledge.extraction.base import (
    _JOIN,
    Limits,
)
from knowledge.extraction.html_shapes import (
    _admonition_title,
    _blocks,
    _bold_question,
    _box_cell,
    _callout_labels,
    _ditto,
    _dl_is_sections,
    _html_cells,
    _item_term,
    _summary,
    _term_labels,
)
from knowledge.extraction.html_tree import (
    _HTML_CHECK_EVERY,
    _HTML_HEADINGS,
    _below,
    _html_dropped,
    _html_text,
    _local_contents,
    _plain_text,
    _push_children,
)

_HTML_BLOCKS = {"p", "dt", "pre", "figcaption", "caption", "tr"}
# Elements that hold inline text (then they are one block) or blocks of their own, which stay
# apart: the paragraphs and listings of an AsciiDoc or DocBook <dd> or <li>.
_HTML_FLOW = {"li", "dd", "blockquote"}
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
