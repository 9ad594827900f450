"""What an extractive answer quotes: one contiguous window of a passage around the sentence
that answers the question best, in source order, verbatim.

Documentation FAQs answer a question in the few sentences under it: the best sentence alone
("Yes.", "That depends on where Python came from.") often lacks the fact, and two scattered
sentences lose the thread. So the quote starts at the best sentence (or at the one before it,
when the best goes on from it: "to return you to the branch…"; or at the sentence introducing
it, when that one ends with a colon: a list or a command follows; or at the start of its
paragraph, when that is within PARAGRAPH_REACH words), runs on through the sentences after it
until it holds about MIN_WORDS words (never more than MAX_WORDS), and reaches back before the
best sentence only when the passage ends first; it never ends on the best sentence itself
while the next one fits (a second quote's best sentence can fill its 25 words alone: "Say you
modify a branch with git reset --hard, and then realize…" and then the reflog that answers;
on the five development sets and the demo one key fact more, none fewer, 3 words more a
reply). A passage is a chunk of its section: the
window runs on into the rest of the section (the search's `continuation`) before it reaches
back, since the answer follows the sentence that matches the question ("…then it will fail
with an error like: …" and then the cause), and chunk boundaries are the index's, not the
author's. A quote does not start inside a code block
(it starts at the sentence introducing the block) nor stop on a sentence that announces
what follows ("…include:"), inside a code block or on a sentence the next block finishes
("…run the command" and then the command), while MAX_WORDS allows. The quote is laid
out as the reader needs it (`layout`): prose on one line, each code line on a line of its own
with its indentation; only whitespace differs from the source.

Long entries (several paragraphs with code between them, demo/dev_sqlalchemy_faq) are why the
paragraph start, the code rules and the completion exist: a code line that repeats the
question's identifiers ("o.foo_id = 7") outscored the prose that answers it, and windows
ended on "…like this:" or in the middle of the code that was the answer.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from knowledge.text import content_words, split_sentences
from verification.quotes import ELLIPSIS

# First measured on demo/dev_faq alone (30 words lost 3 key facts and 4 follow-ups against
# 50-90). On the five development sets and the demo together, 60-110 quotes 7 key facts more
# than 50-90 (224 against 217 of 271; replies average 95 words against 85), and makes the
# longer window of long entries (60-100) redundant. A second passage adds a shorter window of
# another section or part.
MIN_WORDS = 60
MAX_WORDS = 110
SECOND_MIN_WORDS, SECOND_MAX_WORDS = 25, 60
# A first quote from an entry whose heading asks the question (`lead`) is that entry's answer:
# it runs longer. On the five development sets and the demo, 100-130 quotes 2 key facts more
# than 60-110 and none fewer (replies 112 -> 117 words); 80-150 one more, 100-150 the same
# as 100-130 at 118 words. Filling the window (every sentence that fits in 130 words, not
# stopping at 100) quotes 5 key facts more on the eleven development sets and none fewer,
# replies 2 words longer on average: an entry's answer ends where its entry does ("SQLite
# follows interpretation (1)" after the two readings of the standard; 115 and 120 the same).
LEAD_MIN_WORDS = LEAD_MAX_WORDS = 130
OVERLAP_WEIGHT = 0.3  # question-word overlap next to cosine, as in verification.best_sentences
# A line of a code block is a weaker anchor than prose (dev-sqlalchemy 34 -> 35 of 45 key
# facts; 0.1-0.3 measured the same or worse). The code is still quoted after its prose.
CODE_PENALTY = 0.15
# The quote starts at its paragraph's first sentence when the sentences before the best one
# in that paragraph hold at most this many words (dev-sqlalchemy 36 -> 37; 20 and 40: 36).
PARAGRAPH_REACH = 60

# A sentence that starts in lowercase goes on from the one before it ("to return you to the
# branch you were on before." after "finally, run $ git bisect reset": dev-git one follow-up
# more). Capitalised pointers back ("This command…") measured worse (-3 key facts, +1).
_GOES_ON = re.compile(r"^[a-z]")

# A question that asks what something is ("what's X", "the difference between X and Y", "what
# does X mean"), and a sentence that says what one of its words is ("A "server" is any
# machine that…"): the definition answers it better than a sentence using the word. FAQ
# entries already open on theirs (the lead rule); on the eleven development sets this changed
# one reply, the one it was written for (dev-cups, +1 key fact), and no other.
_ASKS_WHAT = re.compile(
    r"\bwhat\s*(?:'s|s|\s+is|\s+are)\s+(?:(?:an?|the)\s+)?[\w.+-]+(?:\s+[\w.+-]+)?"
    r"(?:\s+exactly)?\s*(?:[?.!,;]|$)|\bdifference between\b|\bwhat does .+ mean\b"
    r"|\bmeaning of\b|\bdefine\b",
    re.I,
)
_DEFINES = re.compile(
    r"^\W*(?:(?:an?|the)\s+)?[\"“‘']?((?:[\w.+-]+\s+){0,3}?[\w.+-]+)[\"”’']?,?"
    r"\s+(?:is|are|means|refers to|stands for)\s",
    re.I,
)
DEFINITION_BONUS = 0.15
_WORD = re.compile(r"\S+")
_WORDLIKE = re.compile(r"\w")
_ENDS_IN_WORD = re.compile(r"\w\s*$")
_BLOCK_BREAK = re.compile(r"\n\n")


@dataclass(frozen=True)
class Unit:
    """A sentence (or list item, table row, code line) of a passage and where it sits:
    `block` counts the blank-line-separated blocks before it (paragraphs, code blocks, list
    items), `code` is true for the lines of a block that keeps line breaks (a code block)."""

    text: str
    start: int
    end: int
    block: int = 0
    code: bool = False

    @property
    def words(self) -> int:
        return len(_WORD.findall(self.text))


@dataclass(frozen=True)
class Window:
    """The quote: passage text from units[first] to units[last], whitespace squashed."""

    quote: str
    first: int
    last: int
    score: float  # the best unit's score (how well the window answers)
    start: int  # character span of the quote in the passage text
    end: int


def squash(text: str) -> str:
    return " ".join(text.split())


def is_code(block: str) -> bool:
    """Is a blank-line-separated block code? Extraction keeps line breaks only inside
    preformatted blocks, so a block holding one is code."""
    return "\n" in block.strip()


def passage_units(text: str) -> list[Unit]:
    """The passage's sentences with their positions (found in order, left to right) and
    blocks: extraction separates blocks by a blank line and keeps line breaks only inside
    preformatted blocks, so a block holding a line break is code."""
    breaks = [m.start() for m in _BLOCK_BREAK.finditer(text)]
    bounds = [0, *(b + 2 for b in breaks), len(text) + 2]
    code_blocks = {
        i for i in range(len(bounds) - 1) if is_code(text[bounds[i] : bounds[i + 1] - 2])
    }
    units: list[Unit] = []
    cursor = 0
    for sentence in split_sentences(text, verbatim=True):
        at = text.find(sentence, cursor)
        if at < 0:  # cannot happen (verbatim sentences are substrings, in order): one unit
            return [Unit(text.strip(), 0, len(text))] if text.strip() else []
        block = bisect.bisect_right(breaks, at)
        units.append(Unit(sentence, at, at + len(sentence), block, block in code_blocks))
        cursor = at + len(sentence)
    return units


def runs_on(unit: Unit, following: Unit) -> bool:
    """Does a prose unit run on into the next block: no closing mark, a block break after
    it ("…you can run the command" / "systemctl disable service.service", a table's rows)?
    On the five development sets and the demo, finishing such a unit quotes 2 key facts more
    and none fewer, for half a word more per reply."""
    return not unit.code and following.block != unit.block and bool(_ENDS_IN_WORD.search(unit.text))


def goes_on(sentence: str) -> bool:
    """Does the sentence continue the one before it (a lowercase start)?"""
    return bool(_GOES_ON.match(sentence.lstrip("\"'“‘(")))


def unit_scores(
    query: str, units: Sequence[Unit], *, embed: Callable[[list[str]], list]
) -> list[float]:
    """Cosine to the question plus question-word overlap, per unit (one embedding call).

    A follow-up is scored for its own words only: weighing the question it follows in (at
    0.25 or 0.5) changed no answer of the development sets."""
    vectors = np.asarray(embed([query, *(u.text for u in units)]), dtype=np.float32)
    query_words = content_words(query)
    asks_what = bool(_ASKS_WHAT.search(query.replace("’", "'")))
    scores = []
    for unit, vec in zip(units, vectors[1:], strict=True):
        overlap = len(query_words & content_words(unit.text)) / (len(query_words) or 1)
        score = float(vectors[0] @ vec) + OVERLAP_WEIGHT * overlap
        if asks_what and not unit.code:
            defined = _DEFINES.match(unit.text)
            if defined and query_words & content_words(defined.group(1)):
                score += DEFINITION_BONUS
        if len(content_words(unit.text)) < 2:
            score -= 0.2  # "Yes." or a bare code token answers nothing on its own
        if unit.code:
            score -= CODE_PENALTY
        scores.append(score)
    return scores


@dataclass(frozen=True)
class _Budget:
    """The units a window is cut from and the words it should reach (`min_words`) and may
    hold (`max_words`)."""

    units: Sequence[Unit]
    min_words: int
    max_words: int

    def words(self, first: int, last: int) -> int:
        """Words of units[first] to units[last], both included."""
        return sum(u.words for u in self.units[first : last + 1])

    def fits(self, first: int, last: int) -> bool:
        """Do units[first] to units[last] hold at most `max_words` words?"""
        return self.words(first, last) <= self.max_words

    def short(self, first: int, last: int) -> bool:
        """Do units[first] to units[last] hold fewer than `min_words` words?"""
        return self.words(first, last) < self.min_words


def window(
    text: str,
    units: Sequence[Unit],
    scores: Sequence[float],
    *,
    min_words: int = MIN_WORDS,
    max_words: int = MAX_WORDS,
    lead: bool = False,
) -> Window:
    """The contiguous window around the best unit (see the module docstring); with `lead`
    (the passage sits under a heading that asks the question) it starts at the passage's
    first unit whenever the best one is within reach. Units past the end of `scores` (the
    passage's continuation) are never the best one: the window only runs on into them."""
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    budget = _Budget(units, min_words, max_words)
    first = _start(budget, best, lead=lead)
    last = _run_on(budget, first, best)
    first = _reach_back(budget, first, last)
    first = _code_intro(budget, first, last)
    last = _finish(budget, first, last)
    first = _skip_stray_marks(units, first, last)
    return _quote(text, budget, first, last, scores[best])


def _paragraph_start(units: Sequence[Unit], best: int) -> int:
    """The first unit of the block `best` sits in."""
    opening = best
    while opening > 0 and units[opening - 1].block == units[best].block:
        opening -= 1
    return opening


def _lead_in(budget: _Budget, best: int, *, lead: bool) -> int:
    """The unit the quote would start at, by the first rule that applies: the passage's
    first (`lead`, within max_words), the unit the best goes on from, the unit introducing
    it with a colon, its paragraph's first (within PARAGRAPH_REACH words); else the best."""
    units = budget.units
    if lead and budget.fits(0, best):
        return 0
    if best > 0 and goes_on(units[best].text):
        return best - 1
    if best > 0 and units[best - 1].text.rstrip().endswith(":"):
        return best - 1  # "Make sure that:" / "Then do this:" introduces what follows
    opening = _paragraph_start(units, best)
    if opening < best and budget.words(opening, best - 1) <= PARAGRAPH_REACH:
        return opening  # the paragraph's first sentence states what the rest explains
    return best


def _start(budget: _Budget, best: int, *, lead: bool) -> int:
    """The lead-in (`_lead_in`) shortened until it and the best unit fit in max_words."""
    first = _lead_in(budget, best, lead=lead)
    while first < best and not budget.fits(first, best):
        first += 1  # what leads up to the best unit gives way to it (never cut mid-sentence)
    return first


def _run_on(budget: _Budget, first: int, best: int) -> int:
    """The last unit: on from the best one until the window holds min_words (within
    max_words), and never the best one itself while the next unit fits."""
    last = best
    while last + 1 < len(budget.units) and budget.short(first, last):
        if not budget.fits(first, last + 1):
            break
        last += 1
    if last == best and last + 1 < len(budget.units) and budget.fits(first, last + 1):
        last += 1  # the answer follows the sentence that matches the question: never end on it
    return last


def _reach_back(budget: _Budget, first: int, last: int) -> int:
    """The first unit, moved back while the window is short of min_words (within
    max_words): only when the passage ends first."""
    while first > 0 and budget.short(first, last):
        if not budget.fits(first - 1, last):
            break
        first -= 1
    return first


def _code_intro(budget: _Budget, first: int, last: int) -> int:
    """The first unit, moved back out of a code block to the sentence introducing it (within
    max_words)."""
    while first > 0 and budget.units[first].code and budget.fits(first - 1, last):
        first -= 1  # a code block is quoted from the sentence that introduces it
    return first


def _leaves_unfinished(units: Sequence[Unit], last: int) -> bool:
    """Does the window stop short of what units[last] calls for: it announces what follows
    ("…include:"), it is inside a code block, or it runs on into the next block?"""
    announces = units[last].text.rstrip().endswith(":")
    in_code = units[last].code and units[last + 1].block == units[last].block
    return announces or in_code or runs_on(units[last], units[last + 1])


def _finish(budget: _Budget, first: int, last: int) -> int:
    """The last unit, moved on while the window is unfinished (within max_words)."""
    while last + 1 < len(budget.units) and budget.fits(first, last + 1):
        if not _leaves_unfinished(budget.units, last):
            break
        last += 1  # what "…include:" announces, the rest of a code block or of a sentence
    return last


def _skip_stray_marks(units: Sequence[Unit], first: int, last: int) -> int:
    """The first unit, moved past units without a word character."""
    while first < last and not _WORDLIKE.search(units[first].text):
        first += 1  # never open on a stray mark (". To start…" after a code block in a sentence)
    return first


def _quote(text: str, budget: _Budget, first: int, last: int, score: float) -> Window:
    """The window of units[first] to units[last], laid out (`layout`); a code line keeps its
    indentation, and one run-on unit over max_words is cut at a word boundary and marked."""
    units = budget.units
    start, end = units[first].start, units[last].end
    line = text.rfind("\n", 0, start) + 1
    if units[first].code and not text[line:start].strip():
        start = line  # a code line's indentation is part of it
    quote = layout(text[start:end])
    if not budget.fits(first, last):  # one run-on unit: cut at a word boundary, marked
        quote = " ".join(quote.split()[: budget.max_words])
        end = start + len(quote)
        quote += ELLIPSIS.rstrip()
    return Window(quote, first, last, score, start, end)


def compose(
    query: str,
    text: str,
    *,
    embed: Callable[[list[str]], list],
    min_words: int = MIN_WORDS,
    max_words: int = MAX_WORDS,
    lead: bool = False,
    continuation: str = "",
) -> Window | None:
    """The window of `text` that answers `query` (None when the passage has no text).

    The best sentence is one of `text`'s; the window runs on into `continuation` (the rest
    of the section, past the chunk's end) before it reaches back, since the answer follows
    the sentence that matches the question. Window offsets are into `text + continuation`."""
    whole, units, own = split_passage(text, continuation)
    if not own:
        return None
    scores = unit_scores(query, own, embed=embed)
    return window(whole, units, scores, min_words=min_words, max_words=max_words, lead=lead)


def split_passage(text: str, continuation: str = "") -> tuple[str, list[Unit], list[Unit]]:
    """(text + continuation, its units, the units that start in `text`: the only ones a quote
    may be anchored at, and so the only ones scored)."""
    whole, units, own = _split_passage(text, continuation)
    return whole, list(units), list(own)


@lru_cache(maxsize=1024)
def _split_passage(text: str, continuation: str) -> tuple[str, tuple[Unit, ...], tuple[Unit, ...]]:
    """Cached: a tenant's passages recur across turns, and a turn splits up to 24 of them."""
    whole = text + continuation
    units = passage_units(whole)
    return whole, tuple(units), tuple(u for u in units if u.start < len(text.rstrip()))


def heading_similarity(query: str, headings: Sequence[str]) -> list[float]:
    """How well each passage's own heading (in an FAQ: the question) matches the question:
    the Dice overlap of their content words, 0..1.

    Lexical on purpose: MiniLM cosine of the headings did no better on the development sets
    (one key fact fewer) and cost a model call per turn for passages not seen before."""
    asked = content_words(query)

    def dice(heading: str) -> float:
        words = content_words(heading)
        return 2 * len(asked & words) / ((len(asked) + len(words)) or 1)

    return [dice(h) if h else 0.0 for h in headings]


CARD_CHARS = 400


def layout(text: str) -> str:
    """Text as the reader sees it in a quote: prose squashed to single spaces, each line of a
    code block (a blank-line-separated block holding a line break) on a line of its own
    with its indentation, a line break between a code block and the prose beside it."""
    out: list[str] = []
    previous_code = False
    for block in _BLOCK_BREAK.split(text):
        if not block.strip():
            continue
        code = is_code(block)
        if code:
            body = "\n".join(line.rstrip() for line in block.split("\n") if line.strip())
        else:
            body = squash(block)
        if out:
            out.append("\n" if code or previous_code else " ")
        out.append(body)
        previous_code = code
    return "".join(out)


def surrounding(text: str, win: Window) -> str:
    """What the citation card shows: the passage around the quote (at most CARD_CHARS, code
    laid out as in the quote), or "" when the quote is all of the passage (never the same
    words twice)."""
    if squash(win.quote) == squash(text):
        return ""
    whole = layout(text)
    if len(whole) <= CARD_CHARS:
        return whole
    before = layout(text[: win.start])
    quote = layout(text[win.start : win.end])
    after = layout(text[win.end :])
    room = max(0, CARD_CHARS - len(quote))
    lead = before[-(room // 2) :] if room // 2 and before else ""
    if lead and len(lead) < len(before):
        lead = re.split(r"\s", lead, maxsplit=1)[-1]  # start at a word, not inside one
    tail = after[: max(0, room - len(lead) - 2)] if after else ""
    if tail and len(tail) < len(after):
        tail = re.split(r"\s(?=\S*$)", tail, maxsplit=1)[0]
    card = " ".join(p for p in (lead, quote, tail) if p)
    return card[:CARD_CHARS]
