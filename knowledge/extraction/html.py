"""HTML: the main content's headings and blocks in document order (`_extract_html`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    rows_above: dict = {}  # table body -> the cell texts of its last row read

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
            term = _item_term(item, limits) if name == "li" else None
            if term is not None:  # the term opens the paragraph that explains it
                _push_children(
                    stack, item, lambda c, t=term: [_Label(t[1] + " ")] if c is t[0] else [c]
                )
            else:
                _push_children(stack, item)
        elif name == "table" and (box := _box_cell(item)) is not None:
            flush()
            stack.append(flush_marker)
            cell, label = box
            if label:
                stack.append(_Label(""))
            _push_children(stack, cell)
            if label:
                stack.append(_Label(label))
        elif name in _HTML_BLOCKS or name in _HTML_FLOW:
            has_h1 = has_h1 or any(True for _ in item.iter("h1"))
            flush()
            cells = _html_cells(item) if name == "tr" else []
            texts = [_plain_text(c, limits) for c in cells]
            if cells and not any(texts):
                continue  # a row of empty cells (layout tables of navigation bars)
            if cells:
                texts = _ditto(texts, rows_above.get(item.getparent()))
                rows_above[item.getparent()] = texts
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
