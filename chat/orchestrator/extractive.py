"""Answers quoted from the passages, and the citations every answer carries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from chat.orchestrator.base import Draft, TurnEmbedder
from conversations.models import Message
from knowledge.embeddings import embed_texts
from knowledge.sentences import sentence_vectors_read
from verification import compose, content_words, split_sentences

EXTRACTIVE_PROMPT_VERSION = "extractive-v12"  # cache keys: v12 after ranking by best sentence
# A second passage (another section, or another part of a long entry) is quoted too when its
# rank (evidence, heading and best sentence, below) is this close to the first's: 0.7 quotes 3
# key facts and 1 follow-up more than 0.8 on the five development sets and the demo (then
# measured on evidence alone; 0.6: none more, longer replies).
SECOND_PASSAGE_RATIO = 0.7
# A third quote, as short as the second, when the search cannot tell three passages apart:
# its rank this close to the first's. On the five development sets and the demo, 0.8
# quotes 7 key facts and 1 follow-up more than two quotes (233 against 226 of 271, no answer
# losing its fact), for replies of 111 words on average against 95; 0.85: +5 at 107 words;
# 0.7: +6 at 116. Judged on the rank rather than on evidence alone, the fourteen development
# sets quote 2 key facts more and none fewer (576 of 663), for replies 3.4 words shorter:
# a passage whose sentences do not answer is left out more often (0.6-0.7 and 0.75-0.8 the
# same 576).
THIRD_PASSAGE_RATIO = 0.8
# Every passage the search returns competes (the chat asks for 24,
# `knowledge_answer.CANDIDATE_PASSAGES`): 4 reached 42 of the Django set's 49 key facts, 6
# reached 43, 8 one more of the Debian set's.
CANDIDATES = 24
# Passages are ranked by search evidence plus this share of their heading's similarity to the
# question: in an FAQ the heading is the question, and the entry under it is the answer.
HEADING_WEIGHT = 0.3
# ...plus this share of their best sentence's score (`compose.unit_scores`: cosine to the
# question and word overlap), for every passage whose sentence vectors are stored and the
# first RANKED_BY_SENTENCE of those without: a passage that holds
# a sentence saying what was asked outranks one that shares only the topic or a heading's
# words. On the fourteen development sets (663 questions) 566 -> 574 key facts (+17 -8) at
# 0.3 and the first five of eight; 0.2-0.5 the same; the first three 569, the first four 571,
# all eight 575. The sentences' vectors are stored at indexing (`knowledge.sentences`), so
# every passage that has them is ranked this way: among the search's first 24 rather than its
# first 8, 581 against 577 key facts (+9 -5; 20: 580), the nine from passages the fused
# search ranked 9th to 21st. A passage indexed before its vectors were stored has its
# sentences embedded by the turn (about 8 ms each on a 2-core CPU): only the first five such.
SENTENCE_WEIGHT = 0.3
RANKED_BY_SENTENCE = 5
# A heading this similar to the question makes its passage's lead the start of the quote: its
# word overlap (Dice), or the MiniLM cosine of heading and question (customers rarely use the
# heading's words: dev-celery and dev-git one key fact more each at 0.6, none fewer; 0.5
# the same, 0.7 half of it). Ranking by the cosine as well measured worse (-3). Since the
# entry's quote runs longer (compose.LEAD_MAX_WORDS), a Dice of 0.4 quotes one key fact more
# than 0.5 and none fewer ("on windows git diff says my utf-16 files are binary" under "I'm on
# Windows and my text files are detected as binary."); 0.3 the same as 0.4.
LEAD_MIN_SIM = 0.4
LEAD_MIN_COSINE = 0.6
# The headings of this many passages (ranked by evidence and heading words) are embedded with
# the question; another is embedded only if its passage is quoted (24 headings cost ~150 ms).
HEADINGS_EMBEDDED = 8
# The first quote is also an entry's answer when its heading asks any question: the search
# and the ranking above chose that entry, and in an FAQ its opening answers it, however the
# customer worded theirs ("how do i get an id column that counts up by itself" under "How do
# I create an AUTOINCREMENT field?": no shared word, cosine under 0.6). On the seven
# development sets and the demo: key facts +3 ("an id column…", the git editor, git
# credentials) and -1 (auto_vacuum: the entry's opening crowds out its third paragraph),
# follow-ups +2 (dev-fetchmail), replies one word longer on average.


def _asks(heading: str) -> bool:
    """Is the heading a question (an FAQ entry: the passage under it is its answer)?"""
    return heading.rstrip().endswith("?")


def _heading_cosine(query: str, heading: str, embed) -> float:
    """MiniLM cosine of a heading to the question."""
    if not heading:
        return 0.0
    question, vector = np.asarray(embed([query, heading]), dtype=np.float32)
    return float(vector @ question)


def _section(passage) -> tuple:
    return (passage.document_id, tuple(passage.heading_path))


def _overlaps(a, win_a, b, win_b) -> bool:
    """Do two quotes share text of their document (chunks of one section overlap)?"""
    if a.document_id != b.document_id:
        return False
    start_a, start_b = a.span[0] + win_a.start, b.span[0] + win_b.start
    return start_a < b.span[0] + win_b.end and start_b < a.span[0] + win_a.end


class _Ranked(NamedTuple):
    """A candidate passage with its heading (the last of its path) and how well that heading
    matches the question (`compose.heading_similarity`)."""

    passage: Any
    sim: float
    heading: str


def extractive_draft(
    *,
    query: str,
    passages,
    embed: Callable[[list[str]], list[list[float]]] = embed_texts,
    max_quotes: int = 3,
) -> Draft:
    """Quote the best passage as one contiguous window (`compose`), and a shorter one of a
    second passage (and of a third) when its rank is nearly as high and it quotes other
    text (another section, or another part of a long entry: shown in source order); each
    quote cited, its card showing the passage around it.

    At most `max_quotes` quotes (a hedged reply quotes two). Passages are ranked by
    evidence, by how well their heading asks the question and by how well their best
    sentence answers it (passages with stored sentence vectors, and the first few others); a
    follow-up's passages were found with the question it follows (`followup`), its quote is
    chosen for its own words."""
    if not isinstance(embed, TurnEmbedder):
        embed = TurnEmbedder(embed, shared=None)  # each text embedded once here too
    ranked, rank = _rank(query, passages[:CANDIDATES], embed)
    chosen = _choose(query, ranked, rank, embed, max_quotes)
    if not chosen:  # passages without sentences: quote the first as it is
        return _whole_passage_draft(ranked[0].passage)
    return _quotes_draft(_in_source_order(chosen))


def _rank(query: str, candidates, embed: TurnEmbedder) -> tuple[list[_Ranked], dict[Any, float]]:
    """The candidates best first, and each one's rank by chunk id: evidence, plus
    HEADING_WEIGHT of its heading's similarity, plus SENTENCE_WEIGHT of its best sentence's
    score (`_best_sentence_scores`, chosen among the candidates ranked without it)."""
    headings = [p.heading_path[-1] if p.heading_path else "" for p in candidates]
    sims = compose.heading_similarity(query, headings)
    stored = _seed_stored(candidates, embed)
    ranked = sorted(
        (_Ranked(*psh) for psh in zip(candidates, sims, headings, strict=True)),
        key=lambda r: (-(r.passage.evidence + HEADING_WEIGHT * r.sim), -r.passage.score),
    )
    sentence = _best_sentence_scores(query, ranked, stored, embed)
    rank = {
        r.passage.chunk_id: r.passage.evidence
        + HEADING_WEIGHT * r.sim
        + SENTENCE_WEIGHT * sentence.get(r.passage.chunk_id, 0.0)
        for r in ranked
    }
    ranked.sort(key=lambda r: (-rank[r.passage.chunk_id], -r.passage.score))
    return ranked, rank


def _seed_stored(candidates, embed: TurnEmbedder) -> set:
    """Give `embed` the sentence vectors stored at indexing; return those passages' chunk ids."""
    stored = set()
    for passage in candidates:
        vectors = sentence_vectors_read(passage.text, passage.sentence_vectors)
        if vectors:
            embed.seed(vectors)
            stored.add(passage.chunk_id)
    return stored


def _best_sentence_scores(
    query: str, ranked: list[_Ranked], stored: set, embed: TurnEmbedder
) -> dict[Any, float]:
    """The best sentence score (`compose.unit_scores`) of every passage with stored vectors
    and of the first RANKED_BY_SENTENCE without, by chunk id.

    The question, the headings of the first passages and the sentences not stored at
    indexing go in one model call (a call costs about as much as four more sentences); the
    passages are split as `compose` splits them (the seam may join two), and a heading further
    down is embedded only when its passage is quoted."""
    unstored = [r.passage.chunk_id for r in ranked if r.passage.chunk_id not in stored]
    scored = stored | set(unstored[:RANKED_BY_SENTENCE])
    units = {
        r.passage.chunk_id: compose.split_passage(r.passage.text, r.passage.continuation)[2]
        for r in ranked
        if r.passage.chunk_id in scored
    }
    distinct = sorted({r.heading for r in ranked[:HEADINGS_EMBEDDED] if r.heading})
    embed([query, *distinct, *(u.text for own in units.values() for u in own)])
    return {
        chunk_id: max(compose.unit_scores(query, own, embed=embed), default=0.0)
        for chunk_id, own in units.items()
    }


def _choose(
    query: str,
    ranked: list[_Ranked],
    rank: dict[Any, float],
    embed: TurnEmbedder,
    max_quotes: int,
) -> list[tuple[Any, compose.Window]]:
    """Up to `max_quotes` (passage, window) pairs in rank order: the first passage that has a
    window, then those ranked close enough to it whose windows quote other text."""
    chosen: list[tuple[Any, compose.Window]] = []
    for passage, sim, heading in ranked:
        if len(chosen) == max_quotes:
            break
        if not _ranks_close_enough(rank, passage, chosen):
            continue
        lead = (
            sim >= LEAD_MIN_SIM
            or _heading_cosine(query, heading, embed) >= LEAD_MIN_COSINE
            or (not chosen and _asks(heading))
        )
        min_words, max_words = _word_limits(second=bool(chosen), lead=lead)
        win = compose.compose(
            query,
            passage.text,
            embed=embed,
            min_words=min_words,
            max_words=max_words,
            lead=lead,
            continuation=passage.continuation,
        )
        if win is None or _repeats(passage, win, chosen):
            continue
        chosen.append((passage, win))
    return chosen


def _ranks_close_enough(rank: dict[Any, float], passage, chosen: list[tuple]) -> bool:
    """May the passage be quoted after `chosen`: the first always, a second within
    SECOND_PASSAGE_RATIO of the first's rank, a third within THIRD_PASSAGE_RATIO too?"""
    if not chosen:
        return True
    first = rank[chosen[0][0].chunk_id]
    if rank[passage.chunk_id] < SECOND_PASSAGE_RATIO * first:
        return False
    return not (len(chosen) == 2 and rank[passage.chunk_id] < THIRD_PASSAGE_RATIO * first)


def _word_limits(*, second: bool, lead: bool) -> tuple[int, int]:
    """(min_words, max_words) of a quote: shorter after the first, longer for an entry's lead."""
    if second:
        return compose.SECOND_MIN_WORDS, compose.SECOND_MAX_WORDS
    if lead:
        return compose.LEAD_MIN_WORDS, compose.LEAD_MAX_WORDS
    return compose.MIN_WORDS, compose.MAX_WORDS


def _repeats(passage, win: compose.Window, chosen: list[tuple]) -> bool:
    """Does the window quote text already chosen (contains or is contained in a quote, or
    shares text of its document with one)?"""
    return any(
        win.quote in w.quote or w.quote in win.quote or _overlaps(passage, win, p, w)
        for p, w in chosen
    )


def _in_source_order(chosen: list[tuple]) -> list[tuple]:
    """Parts of one entry in the entry's order (the sections in the order they ranked)."""
    sections = list(dict.fromkeys(_section(p) for p, _ in chosen))
    chosen.sort(key=lambda pw: (sections.index(_section(pw[0])), pw[0].span[0] + pw[1].start))
    return chosen


def _whole_passage_draft(best) -> Draft:
    """Quote the passage as it is (no passage had sentences), cited with an empty card."""
    return Draft(
        f"“{compose.squash(best.text)}” [1]",
        Message.Kind.EXTRACTIVE,
        [best],
        {1: ""},
        {"prompt_version": EXTRACTIVE_PROMPT_VERSION},
    )


def _quotes_draft(chosen: list[tuple]) -> Draft:
    """One cited line per (passage, window), its card showing the passage around the quote."""
    parts, quotes = [], {}
    for n, (passage, win) in enumerate(chosen, start=1):
        quotes[n] = compose.surrounding(passage.text + passage.continuation, win)
        parts.append(f"“{win.quote}” [{n}]")
    return Draft(
        "\n".join(parts),
        Message.Kind.EXTRACTIVE,
        [p for p, _ in chosen],
        quotes,
        {"prompt_version": EXTRACTIVE_PROMPT_VERSION},
    )


def quote_for(passage_text: str, sentence: str) -> str:
    """The passage sentence closest to what the answer said (what the customer can check)."""
    words = content_words(sentence)
    best = max(
        split_sentences(passage_text) or [passage_text],
        key=lambda s: len(words & content_words(s)),
    )
    return best[:400]


def _heading(passage) -> str:
    """The section path under the document title (the title is shown separately)."""
    path = list(passage.heading_path)
    if path and path[0].strip().lower() == passage.title.strip().lower():
        path = path[1:]
    return " › ".join(path)


def citations(draft: Draft) -> list[dict[str, Any]]:
    return [
        {
            "index": n,
            "chunk_id": p.chunk_id,
            "document_id": p.document_id,
            "document_version": p.document_version,
            "title": p.title,
            "heading": _heading(p),
            "quote": draft.quotes.get(n, "")[:400],
            "span": list(p.span),
            "url": p.url,
        }
        for n, p in enumerate(draft.passages, start=1)
    ]
