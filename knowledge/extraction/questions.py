"""FAQ entries a page writes without heading tags, read after the page is walked (HTML and
Markdown: `html._extract_html`, `text._extract_markdown`).

Help centres and hand-written FAQs often mark a question only by its place: a `<div
class="faq-question">How do I…?</div>` over its answer, a paragraph that asks and the one
after it that answers, or "Q: …?<br>A: …" in one paragraph. Such a question heads its
answer (one level below the heading above it), as the bold questions and `<details>`
summaries of `html.py` do, so that search sees the question as the entry's heading and a
quote starts at its answer.

A paragraph that only labels the next one ("Note:" in bold over a CUPS note, Sphinx's "Note"
and "See also" box titles) opens that paragraph instead of standing alone (`labels_joined`):
a chunk or quote that holds the note then says it is one, and no quote is the label alone.

Troubleshooting pages and knowledge-base articles split each entry into parts under headings
of their own ("Symptom", "Cause", "Solution"; "Problem", "Resolution", "Workaround"). Such a
heading names a part of the entry above it, not a topic: as a section it cut the symptom the
customer describes from the solution that answers it, and every entry's solution was a
section called "Solution". It labels its part instead (`parts_as_labels`, then
`labels_joined`): "Solution: Configure the registries.conf…" inside the entry's section.
"""

from __future__ import annotations

import re

from knowledge.extraction.base import _JOIN
from knowledge.extraction.html_tree import _below

# Longest question taken as a heading (as QUESTION_HEADING_MAX_CHARS in html.py).
QUESTION_MAX_CHARS = 300
# Paragraphs that only ask, each over an answer, head their answers only when a page has at
# least this many: one rhetorical question in prose ("Why does this matter?") stays prose.
LONE_QUESTIONS_MIN = 3

# "Q: Do you ship abroad?" then "A: Yes, …" in the same paragraph (a <br>, or a space,
# between them).
_ASKED_AND_ANSWERED = re.compile(
    rf"(?:Q|Question)\s*[:.]\s+(?P<q>[^?{_JOIN}]{{1,{QUESTION_MAX_CHARS}}}\?)"
    rf"[\s{_JOIN}]+(?:A|Answer)\s*[:.][\s{_JOIN}]+(?P<a>\S.*)",
    re.IGNORECASE | re.DOTALL,
)
_SPACES = re.compile(rf"[\s{_JOIN}]+")
_LABEL = re.compile(
    r"(?:notes?|tip|hint|warning|important|caution|attention|danger|see also)\s*:?", re.I
)
# The parts of a troubleshooting or knowledge-base entry, as their headings name them.
_PART = re.compile(
    r"(?:symptoms?|(?:possible |root )?causes?|solutions?|resolution|workarounds?|"
    r"fix|problem|issue|answer|explanation|diagnosis)\s*:?",
    re.I,
)


def parts_as_labels(entries: list[tuple[str | None, int]]) -> list[tuple[str | None, int]]:
    """Make a heading that only names a part of the entry above it ("Symptom", "Solution")
    a label paragraph of that entry ("Solution:"), which `labels_joined` then joins to the
    paragraph it labels. A part heading with no heading above it stays a heading. Entries as
    in `questions_as_headings`."""
    out: list[tuple[str | None, int]] = []
    headed = False
    for text, level in entries:
        if text is not None and level > 0:
            name = _SPACES.sub(" ", text).strip()
            if headed and _PART.fullmatch(name):
                out.append((f"{name.rstrip(':').rstrip()}:", 0))
                continue
            headed = True
        out.append((text, level))
    return out


def labels_joined(entries: list[tuple[str | None, int]]) -> list[tuple[str | None, int]]:
    """Join a paragraph that is only an admonition label ("Note:", "See also") to the
    paragraph after it ("Note: The lpmove command is located…"); a label over anything else
    (a heading, code, the end) stays as it is. Entries as in `questions_as_headings`."""
    out: list[tuple[str | None, int]] = []
    i = 0
    while i < len(entries):
        text, level = entries[i]
        following = entries[i + 1] if i + 1 < len(entries) else (None, None)
        label = _SPACES.sub(" ", text).strip() if level == 0 and text else ""
        labels = label and (_LABEL.fullmatch(label) or _PART.fullmatch(label))
        if labels and following[1] == 0 and following[0]:
            rest = following[0].lstrip(f" \n\t{_JOIN}")
            out.append((f"{label.rstrip(':').rstrip()}: {rest}", 0))
            i += 2
            continue
        out.append((text, level))
        i += 1
    return out


def questions_as_headings(entries: list[tuple[str | None, int]]) -> list[tuple[str | None, int]]:
    """Split "Q: …? A: …" paragraphs into a heading and its answer; make lone questions
    over their answers headings when the page has LONE_QUESTIONS_MIN of them. Entries are
    (text, level) as `html._extract_html` collects them (level 0 a paragraph, -1
    preformatted, >0 a heading; text None ends the sections of its level)."""
    split: list[tuple[str | None, int, bool]] = []  # (text, level, asked in a Q:/A: pair)
    for text, level in entries:
        match = (
            _ASKED_AND_ANSWERED.fullmatch(text.strip(f" {_JOIN}")) if level == 0 and text else None
        )
        if match:
            split.append((_SPACES.sub(" ", match["q"]).strip(), 0, True))
            split.append((match["a"], 0, False))
        else:
            split.append((text, level, False))
    lone = [
        i
        for i, (text, level, asked) in enumerate(split)
        if asked or (level == 0 and _asks_alone(text) and _answers(split, i + 1))
    ]
    promote = {i for i in lone if split[i][2]}
    if len(lone) >= LONE_QUESTIONS_MIN:
        promote.update(lone)
    out: list[tuple[str | None, int]] = []
    headed = 0  # the level of the last heading of the page itself
    for i, (text, level, _) in enumerate(split):
        if i in promote:
            out.append((text, _below(headed)))
            continue
        if text is None:
            headed = level - 1
        elif level > 0:
            headed = level
        out.append((text, level))
    return out


def _asks_alone(text: str | None) -> bool:
    """Is the paragraph one short question (no sentence before its question mark)?"""
    if not text:
        return False
    plain = _SPACES.sub(" ", text).strip()
    if not plain.endswith("?") or len(plain) > QUESTION_MAX_CHARS:
        return False
    return not re.search(r"[.!?]\s+\S", plain[:-1])


def _answers(split: list[tuple[str | None, int, bool]], i: int) -> bool:
    """Does entry `i` answer (a paragraph or a listing that does not itself ask)?"""
    if i >= len(split):
        return False
    text, level, asked = split[i]
    return text is not None and level <= 0 and not asked and not _asks_alone(text)
