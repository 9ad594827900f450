"""HTML: recognising the shapes documentation pages take in plain tags: labelled lists that are
sections or glossaries, option lists, boxes around one cell, admonitions, bold or "Q:"
questions, accordions, callout lists, grouped table rows."""

from __future__ import annotations

import re

from knowledge.extraction.base import (
    _SPACES,
    Limits,
)
from knowledge.extraction.html_tree import (
    _HTML_HEADINGS,
    _html_dropped,
    _html_text,
    _plain_text,
    classes,
)

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
