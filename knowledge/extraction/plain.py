"""Plain text: paragraphs, headings, lists and indented code as a plain-text FAQ writes them.

Plain text has no markup, so structure is read from the conventions such files follow:
- titles underlined (or over- and underlined) with a repeated mark, short lines in capitals;
- numbered titles ("Chapter 2: Usage", "1.4: On what machines will it run?", "3. How do I
  …?"), FAQ questions ("Q: …" with the answer after "A: …") and a short line that asks a
  question over its answer;
- bullet and numbered list items, one block each (a wrapped item's lines joined);
- code: lines indented at least three columns deeper than the prose around them keep their
  line breaks (a shell command, a config file), as HTML's `<pre>` does;
- lines of decoration (`=-=-=-=`, `-----`) are dropped, and so is a table of contents: a
  list whose items number the document's own headings.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from knowledge.extraction.base import Extracted, Limits

TAB = 8
# A code line sits this many columns deeper than the prose it interrupts (a wrapped
# paragraph's hanging indent is one or two; a paragraph's indented first line is not code).
CODE_INDENT = 3
# Longest text taken as a heading: a numbered title, or an FAQ question with its context
# ("Q: I am using screen with a YYY terminal, … I cannot render graphics.").
MAX_TITLE = 120
MAX_QUESTION = 300
# A line this long that does not end a sentence wraps into the next (whose number, if it
# opens with one, is not a list mark).
WRAPPED = 60
# A table of contents: at least this many items, most of them numbering a later heading.
TOC_MIN_ITEMS = 3
TOC_SHARE = 0.6
# Headings of one number compared with a contents line (bounds the work on hostile input).
NAMED_MAX = 50

_QUESTION = re.compile(r"(?:Q|Question)\s*[:.)]\s+(?=\S)")
_ANSWER = re.compile(r"(?:A|Answer)\s*[:.)]\s+(?=\S)")
_CHAPTER = re.compile(r"(?i:chapter|part|appendix)\s+([0-9]+|[IVXLC]+|[A-Z])\s*[:.]?\s+(?=\S)")
# "1.4:", "1.4.", "1.4" or "3." opening a title; a list item's number ends in a mark.
_TITLE_NUMBER = re.compile(r"(\d{1,3}(?:\.\d{1,3})*)(?:\.?\)|[.:])?\s+(?=\S)")
_ITEM_NUMBER = re.compile(r"(\d{1,3}(?:\.\d{1,3})*)(?:\.?\s?\)|[.:])\s+(?=\S)")
_BULLET = re.compile(r"(?:[-*+\u2022\u00b7]|\(\d{1,3}\)|\([a-z]\))\s+(?=\S)")
_O_BULLET = re.compile(r"o\s+(?=\S)")
_CODE_SYMBOLS = frozenset("=$<>{}[]|&;\\/~*#%^+@")
_DECORATION = re.compile(r"[^\w\s]{3,}|([^\w\s])(?:\s*\1){2,}")


@dataclass
class _Line:
    indent: int  # columns, a tab to the next multiple of 8
    text: str  # without the indentation
    raw: str


@dataclass
class _Segment:
    kind: str  # "heading" | "prose" | "item" | "code"
    lines: list[str] = field(default_factory=list)
    level: int = 0
    number: str = ""  # a numbered heading's or item's number ("1.4", "chapter 2")
    indent: int = 0  # an item's text column: its wrapped lines start there
    mark: int = 0  # an item's mark column


def _extract_plain(text: str, limits: Limits) -> Extracted:
    """Paragraphs split on blank lines, read for headings, list items and code (see the
    module docstring); blocks in source order."""
    result = Extracted(limits)
    parsed = _parsed(_paragraphs(text, limits))
    titles = _Titles.of(parsed)
    for segments in parsed:
        if _is_contents(segments, titles.by_number):
            continue
        for segment in segments:
            if segment.kind == "heading" and segment.number and titles.listed_again(segment):
                continue  # the same number and title again further on: a contents' line
            _segment_add(result, segment)
    return result


def _paragraphs(text: str, limits: Limits) -> list[list[_Line]]:
    """The non-blank lines of each paragraph (paragraphs split on blank lines)."""
    paragraphs = []
    for raw in re.split(r"\n[ \t]*\n", text.replace("\r\n", "\n").replace("\r", "\n")):
        limits.check_time()
        lines = [_line(line) for line in raw.split("\n") if line.strip()]
        if lines:
            paragraphs.append(lines)
    return paragraphs


def _parsed(paragraphs: list[list[_Line]]) -> list[list[_Segment]]:
    """Each paragraph's segments, read in order (`_Reader`); a numbered entry over its
    indented answer is a heading (`_numbered_question`)."""
    body = _body_indent(paragraphs)
    o_bullets = sum(1 for lines in paragraphs for ln in lines if _O_BULLET.match(ln.text)) >= 3
    reader = _Reader(body=body, o_bullets=o_bullets)
    parsed = [reader.paragraph(lines) for lines in paragraphs]
    for i in range(len(parsed) - 1):
        _numbered_question(parsed[i], paragraphs[i], paragraphs[i + 1])
    return parsed


@dataclass
class _Titles:
    """The numbered headings' titles (their words) by number, in document order: numbers
    may restart (each category of the CVS FAQ counts from 1), so a number alone names no
    heading."""

    by_number: defaultdict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    place: dict[int, int] = field(default_factory=dict)  # id(heading) -> its index there

    @classmethod
    def of(cls, parsed: list[list[_Segment]]) -> _Titles:
        titles = cls()
        for segments in parsed:
            for segment in segments:
                if segment.kind == "heading" and segment.number:
                    titles.place[id(segment)] = len(titles.by_number[segment.number])
                    titles.by_number[segment.number].append(_title_key(" ".join(segment.lines)))
        return titles

    def listed_again(self, heading: _Segment) -> bool:
        """Whether a later heading of the same number names the same title."""
        same = self.by_number[heading.number]
        at = self.place[id(heading)]
        return any(_names(same[at], later) for later in same[at + 1 : at + 1 + NAMED_MAX])


def _segment_add(result: Extracted, segment: _Segment) -> None:
    """Add a segment as a block: code keeps its lines, the rest are joined into one."""
    if segment.kind == "code":
        result.add("\n".join(segment.lines), keep_lines=True)
    elif segment.kind == "heading":
        result.add(" ".join(segment.lines), level=segment.level)
    else:
        result.add(" ".join(segment.lines))


def _numbered_question(segments: list[_Segment], lines: list[_Line], after: list[_Line]) -> None:
    """A numbered paragraph alone over a more indented one is an entry's title over its
    answer, even when it states a problem rather than asking ("13. The leading From_ line
    shows the wrong time.")."""
    if len(segments) != 1 or segments[0].kind != "item" or not segments[0].number:
        return
    text = " ".join(segments[0].lines)
    indent = min(ln.indent for ln in lines)
    if len(lines) > 3 or len(text) > MAX_QUESTION or min(ln.indent for ln in after) <= indent + 2:
        return
    match = _ITEM_NUMBER.match(text)
    number = segments[0].number
    segments[0] = _Segment(
        "heading",
        [text[match.end() :] if match else text],
        level=number.count(".") + 1,
        number=number,
    )


def _line(raw: str) -> _Line:
    expanded = raw.rstrip().expandtabs(TAB)
    body = expanded.lstrip()
    return _Line(indent=len(expanded) - len(body), text=body, raw=raw.rstrip())


def _body_indent(paragraphs: list[list[_Line]]) -> int:
    """The indentation of the document's prose: the commonest paragraph indentation,
    counted in lines (an FAQ may indent every answer by a tab)."""
    counts: Counter[int] = Counter()
    for lines in paragraphs:
        counts[min(_text_column(ln) for ln in lines)] += len(lines)
    return counts.most_common(1)[0][0] if counts else 0


def _wrap(lines: list[str], text: str) -> None:
    """Add a wrapped line; a word hyphenated across the break is joined ("environ-" "ment":
    "environ-ment", as "set-" "uid" is "set-uid")."""
    last = lines[-1]
    if last[-2:-1].isalpha() and last.endswith("-") and text[:1].islower():
        lines[-1] += text
    else:
        lines.append(text)


def _reads_as_prose(lines: list[_Line]) -> bool:
    """Do most lines read as wrapped sentences (six words or more, few of the symbols code
    is made of), not as commands or settings? A last line ending a sentence counts as
    worded however short ("…The two most" / "important are:")."""
    worded = 0
    for i, line in enumerate(lines):
        symbols = sum(c in _CODE_SYMBOLS for c in line.text)
        ends = 0 < i == len(lines) - 1 and line.text[-1] in ".:!?"
        comment = line.text.startswith(("#", "//", "--", ";"))  # a config file's note
        worded += (
            (len(line.text.split()) >= 6 or ends)
            and symbols <= 0.05 * len(line.text)
            and not comment
        )
    return worded >= max(2, 0.7 * len(lines))


def _text_column(line: _Line) -> int:
    """Where a line's text starts: after its indentation and an "A:" or "Q:" mark."""
    mark = _ANSWER.match(line.text) or _QUESTION.match(line.text)
    return line.indent + (mark.end() if mark else 0)


def _is_contents(segments: list[_Segment], titles: dict[str, list[str]]) -> bool:
    """Is the paragraph a table of contents: a list whose items name headings (by number
    and words, or by a number in parts no other heading has)?"""
    items = [s for s in segments if s.kind == "item" and s.number]
    if len(items) < TOC_MIN_ITEMS:
        return False
    named = 0
    for item in items:
        text = " ".join(item.lines)
        mark = _ITEM_NUMBER.match(text)
        key = _title_key(text[mark.end() :] if mark else text)
        same = titles.get(item.number, [])
        # A heading numbered in parts ("2.1") that no other heading shares is named by its
        # number alone (a contents line may shorten it: "2.1. sh and ksh?").
        named += ("." in item.number and len(same) == 1) or any(
            _names(key, title) for title in same[:NAMED_MAX]
        )
    return named >= TOC_SHARE * len(items)


def _title_key(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _names(key: str, title: str) -> bool:
    """Do two titles' words match (one may be cut short: a heading keeps its first line)?"""
    return bool(key and title) and (key.startswith(title) or title.startswith(key))


def _underline(line: str) -> bool:
    """A line of one repeated punctuation mark (=== --- ~~~ ^^^ ***), as under a title."""
    return bool(re.fullmatch(r"([=\-~^*+#\"'`:._])\1{2,}", line.strip()))


def _looks_like_heading(line: str) -> bool:
    line = line.strip()
    if not line or len(line) > 80 or line[-1] in ".,;:!?":
        return False
    letters = [c for c in line if c.isalpha()]
    return bool(letters) and (line.isupper() or bool(re.match(r"^#{1,6}\s", line)))


def _number_key(match: re.Match) -> str:
    return match.group(1) if match.re is not _CHAPTER else f"chapter {match.group(1).lower()}"


class _Reader:
    """Reads paragraphs in order; remembers the level of the last title for FAQ questions."""

    def __init__(self, *, body: int, o_bullets: bool) -> None:
        self.body = body
        self.o_bullets = o_bullets
        self.title_level = 0  # level of the last numbered or underlined title
        self.chapters = False

    def paragraph(self, lines: list[_Line]) -> list[_Segment]:
        """The segments of one paragraph: a title over it (underlined, numbered, an FAQ
        question), then its prose, list items and code (`_body`)."""
        out, lines = self._underlined(lines)
        lines = [ln for ln in lines if not _DECORATION.fullmatch(ln.text)]
        if lines:
            lines = self._question(lines, out)
        if lines:
            lines = self._opening(lines, out)
            out.extend(self._body(lines))
        return out

    def _underlined(self, lines: list[_Line]) -> tuple[list[_Segment], list[_Line]]:
        """A title underlined (or over- and underlined) opening the paragraph, and the lines
        after it."""
        texts = [ln.text for ln in lines]
        if len(texts) >= 3 and _underline(texts[0]) and _underline(texts[2]):
            return [self._title(texts[1], 1)], lines[3:]  # reStructuredText, over and under
        if len(texts) >= 2 and _underline(texts[1]) and not _underline(texts[0]):
            return [self._title(texts[0], 1 if texts[1][0] == "=" else 2)], lines[2:]
        return [], lines

    def _question(self, lines: list[_Line], out: list[_Segment]) -> list[_Line]:
        """The lines after a "Q: …" question opening them (up to its "A: …" answer), which
        goes on `out` as a heading unless longer than MAX_QUESTION."""
        first = lines[0]
        question = _QUESTION.match(first.text)
        if not question:
            return lines
        answer_at = next(
            (i for i, ln in enumerate(lines) if i and _ANSWER.match(ln.text)), len(lines)
        )
        asked = " ".join([first.text[question.end() :], *(ln.text for ln in lines[1:answer_at])])
        if len(asked) > MAX_QUESTION:
            return lines
        out.append(_Segment("heading", [asked], level=self.title_level + 1))
        return lines[answer_at:]

    def _opening(self, lines: list[_Line], out: list[_Segment]) -> list[_Line]:
        """The lines after the title opening them (a numbered title, a line that asks, a
        line in capitals), which goes on `out`; an answer's first line without its "A:"
        mark. A line indented as code opens with no title (`HISTSIZE=200` is not one in
        capitals)."""
        first = lines[0]
        if first.indent >= self.body + CODE_INDENT and not self._item(first):
            return lines
        if answer := _ANSWER.match(first.text):
            # The answer's wrapped lines align with its text, not with the "A:".
            first = _Line(first.indent + answer.end(), first.text[answer.end() :], first.raw)
            return [first, *lines[1:]]
        heading = self._numbered(lines) or self._lone_title(lines)
        if heading is None:
            return lines
        out.append(heading)
        return lines[1:]

    def _lone_title(self, lines: list[_Line]) -> _Segment | None:
        """The first line as a title: an FAQ question (`_asks`), one below the last title,
        or a line that looks like a heading (`_looks_like_heading`); None otherwise."""
        first = lines[0].text
        if self._asks(lines):
            return _Segment("heading", [first], level=self.title_level + 1)
        if _looks_like_heading(first):
            return _Segment("heading", [first], level=2)
        return None

    def _title(self, text: str, level: int) -> _Segment:
        self.title_level = level
        # "---- Frequently Asked Questions ----" between two rules: the words are the title.
        title = re.sub(r"^[^\w\s]{3,}\s*|\s*[^\w\s]{3,}$", "", text.strip())
        return _Segment("heading", [title or text.strip()], level=level)

    def _numbered(self, lines: list[_Line]) -> _Segment | None:
        """A numbered title opening the paragraph (taken out of `lines`): "Chapter 2: …",
        "1.4: On what machines…?", "3. How do I …?".

        Not a numbered list: no line after it is numbered. A question (its paragraph of up
        to three lines asks one) is a title; otherwise the title is one line that does not
        end a sentence, of a number in parts ("1.4") or followed by a colon."""
        first = lines[0]
        match = _CHAPTER.match(first.text) or _TITLE_NUMBER.match(first.text)
        if not match or any(_ITEM_NUMBER.match(ln.text) for ln in lines[1:]):
            return None
        title = first.text[match.end() :]
        taken = 1
        asked = " ".join([title, *(ln.text for ln in lines[1:3])])
        if match.re is _TITLE_NUMBER and "?" in asked and len(asked) <= MAX_QUESTION:
            if len(lines) <= 3:
                title, taken = asked, len(lines)
            else:  # the question's lines, up to the one that ends it
                taken = next(i for i in range(3) if "?" in lines[i].text) + 1
                title = " ".join([title, *(ln.text for ln in lines[1:taken])])
        elif len(title) > MAX_TITLE or title.endswith((".", ",", ";")):
            return None
        elif len(lines) > 1 and len(first.text) >= 0.6 * max(len(ln.text) for ln in lines[1:]):
            return None  # a wrapped sentence, not a title over its text
        elif match.re is _TITLE_NUMBER and "." not in match.group(1) and ":" not in match[0]:
            return None  # "3. Run make": a step, not a title
        if match.re is _CHAPTER:
            self.chapters = True
            level = 1
        else:
            parts = match.group(1).count(".") + 1
            level = max(parts, 2) if self.chapters else parts  # "1.4" in "Chapter 1"
        del lines[1:taken]
        self.title_level = min(level, 6)
        return _Segment("heading", [title], level=self.title_level, number=_number_key(match))

    def _asks(self, lines: list[_Line]) -> bool:
        """A short line that asks, alone over its answer: an FAQ question."""
        line = lines[0].text
        if not line.endswith("?") or len(line) > MAX_TITLE:
            return False
        if len(lines) == 1:
            return True
        # Over its answer in the same paragraph: a line visibly shorter than a wrapped one.
        return len(line) < 0.6 * max(len(ln.text) for ln in lines[1:])

    def _item(self, line: _Line, before: _Line | None = None) -> re.Match | None:
        """The list mark opening `line`; a number is no mark on a line that continues a
        long unfinished one ("… see question" / "1.1) at:")."""
        match = _BULLET.match(line.text)
        if match is None and (
            before is None or len(before.text) < WRAPPED or before.text[-1] in ".:;!?)"
        ):
            match = _ITEM_NUMBER.match(line.text)
        if match is None and self.o_bullets:
            match = _O_BULLET.match(line.text)
        return match

    @staticmethod
    def _wraps(item: _Segment, line: _Line, before: _Line) -> bool:
        """Does an unmarked line continue the list item above it? Aligned with the item's
        text; or, with a hanging indent, anywhere right of its mark ("2. ) Start the shell by
        running the" / "  command `zsh -f' from…"); or at the mark's own column when the line
        before stopped mid-sentence."""
        if line.indent >= item.indent + CODE_INDENT:
            return False
        if line.indent >= item.indent - 1 or line.indent > item.mark:
            return True
        return line.indent == item.mark and before.text[-1] not in ".:;!?)"

    def _body(self, lines: list[_Line]) -> list[_Segment]:
        """Prose, list items and code lines of one paragraph, in order."""
        if not lines:
            return []
        items = [self._item(ln, lines[i - 1] if i else None) for i, ln in enumerate(lines)]
        prose = [ln.indent for ln, item in zip(lines, items, strict=True) if not item]
        base = min(prose) if prose else lines[0].indent
        indented = not items[0] and base >= self.body + CODE_INDENT
        if indented and not _reads_as_prose(lines):  # else prose: an item's next paragraph
            return [_Segment("code", [ln.raw for ln in lines])]
        out: list[_Segment] = []
        for i, (line, item) in enumerate(zip(lines, items, strict=True)):
            current = out[-1] if out else None
            in_item = current is not None and current.kind == "item"
            if item:
                numbered = item.re is _ITEM_NUMBER
                text = line.text if numbered else line.text[item.end() :]
                # Wrapped lines align with the item's text, after a flag ("o * Traps…").
                flag = re.match(r"[*+]\s+", line.text[item.end() :])
                out.append(
                    _Segment(
                        "item",
                        [text],
                        number=item.group(1) if numbered else "",
                        indent=line.indent + item.end() + (flag.end() if flag else 0),
                        mark=line.indent,
                    )
                )
            elif in_item and self._wraps(current, line, lines[i - 1]):
                _wrap(current.lines, line.text)  # a wrapped item
            elif i and line.indent >= (current.indent if in_item else base) + CODE_INDENT:
                if current is not None and current.kind == "code":
                    current.lines.append(line.raw)
                else:
                    out.append(_Segment("code", [line.raw]))
            elif current is not None and current.kind == "prose":
                _wrap(current.lines, line.text)
            else:
                out.append(_Segment("prose", [line.text]))
        return out
