"""Word alignment: which words of a claim the passage sentence licenses.

A fluent paraphrase says the passage's facts in other words; a changed fact often keeps every
word but one and swaps that one for a related word the passage does not license ("credit card"
for "gift card", "billing address" for "shipping address"). Each content word of the claim that
is not in the passage must be licensed: a morphological variant of a passage word, a synonym
from a small curated list, or aligned (BERTScore-style) with a passage word whose contextual
MiniLM vector is close. A word that takes the place of another passage word next to the same
neighbour ("credit" for "gift" before "card") must be close to the word it replaces, and never
its opposite or contrast (`lexicon.CONTRASTS`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from knowledge.text import NEGATIONS, STOPWORDS, stem
from verification.lexicon import are_contrasts, are_synonyms, contrasts_of, root

# A word the passage does not contain is licensed when its contextual vector is this close to
# a passage word's (tuned on the dev and held-out-1/2 splits).
ALIGN_MIN = 0.62
# A word in the slot of another passage word (same neighbour, same side) must be this close to
# the word it replaces.
SWAP_MIN = 0.6

TokenEmbed = Callable[[list[str]], list[tuple[list[tuple[int, int]], np.ndarray]]]

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Adverbs and prepositions: no slot of their own (a paraphrase moves them freely).
_LOOSE = frozenset({
    "still", "yet", "even", "already", "simply", "really", "actually", "ever", "now", "then",
    "also", "within", "during", "until", "via", "per", "through", "across", "among", "onto",
    "upon", "toward", "towards", "without", "between", "along",
})  # fmt: skip
# Numbers and times are the number check's business.
_NUMERIC = re.compile(r"\d|^(?:noon|midnight|pm|am)$")


@dataclass(frozen=True)
class Word:
    text: str  # lowercased
    stem: str
    content: bool  # not a stopword or negation
    start: int
    end: int


@dataclass
class Aligned:
    """A text's words and (when token embeddings are available) one unit vector per word."""

    text: str
    words: list[Word]
    vectors: np.ndarray | None


def words_of(text: str) -> list[Word]:
    """Lowercased word tokens with their character spans (as `text.words`, with positions)."""
    low = text.lower().replace("’", "'")
    if len(low) != len(text):  # a lowercase form of another length: spans would drift
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text).replace("’", "'")
    return [
        Word(
            m.group(0),
            stem(m.group(0)),
            m.group(0) not in STOPWORDS and m.group(0) not in NEGATIONS,
            m.start(),
            m.end(),
        )
        for m in _WORD.finditer(low)
    ]


def _word_vectors(words: list[Word], spans: list[tuple[int, int]], pieces: np.ndarray):
    """Average the word pieces inside each word; unit rows (zero where no piece falls)."""
    out = np.zeros((len(words), pieces.shape[1] if pieces.ndim == 2 else 384), dtype=np.float32)
    starts = np.asarray([s for s, _ in spans] or [0])
    for i, w in enumerate(words):
        rows = [j for j, (s, e) in enumerate(spans) if s >= w.start and e <= w.end]
        if not rows:  # a word cut by truncation, or pieces crossing the word's edge
            rows = [j for j in range(len(spans)) if starts[j] <= w.start < spans[j][1]]
        if rows:
            vec = pieces[rows].mean(axis=0)
            norm = float(np.linalg.norm(vec))
            out[i] = vec / norm if norm else vec
    return out


class WordVectorCache:
    """Contextual word vectors per text, computed in one batch and kept for recent texts
    (passage sentences recur across turns)."""

    def __init__(self, token_embed: TokenEmbed | None, size: int = 4096) -> None:
        self.token_embed = token_embed
        self.size = size
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Aligned] = OrderedDict()

    def __call__(self, texts: Sequence[str]) -> list[Aligned]:
        with self._lock:
            wanted = [t for t in dict.fromkeys(texts) if t not in self._cache]
        fresh: dict[str, Aligned] = {}
        if wanted and self.token_embed is not None:
            for text, (spans, pieces) in zip(wanted, self.token_embed(wanted), strict=True):
                words = words_of(text)
                fresh[text] = Aligned(text, words, _word_vectors(words, spans, pieces))
        else:
            fresh = {t: Aligned(t, words_of(t), None) for t in wanted}
        with self._lock:
            self._cache.update(fresh)
            for text in texts:
                if text in self._cache:
                    self._cache.move_to_end(text)
            found = {t: self._cache.get(t) or fresh[t] for t in texts}
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return [found[t] for t in texts]


@lru_cache(maxsize=65536)
def variant(a: str, b: str) -> bool:
    """Morphological variants: one stem a prefix of the other ("edit"/"editor") or a shared
    prefix of five letters covering most of the shorter ("deletion"/"delete")."""
    if a == b:
        return True
    short, long = sorted((stem(a), stem(b)), key=len)
    if len(short) < 4:
        return False
    if long.startswith(short):
        return len(long) - len(short) <= 4
    common = 0
    for x, y in zip(short, long, strict=False):
        if x != y:
            break
        common += 1
    return common >= 5 and common >= 0.75 * len(short)


def _licensed_by_form(word: Word, others: Sequence[Word]) -> bool:
    if any(o.content and o.stem == word.stem for o in others):
        return True
    return any(o.content and (variant(word.text, o.text) or are_synonyms(word, o)) for o in others)


@dataclass
class Licence:
    """How the claim's content words are licensed by one passage sentence."""

    recall: float  # licensed content words / content words
    unlicensed: list[str]
    reasons: list[str]


def licence(claim: Aligned, support: Aligned) -> Licence:
    """License each content word of the claim against the passage sentence."""
    content = [w for w in claim.words if w.content]
    if not content:
        return Licence(0.0, [], [])
    support_content = [w for w in support.words if w.content]
    sims = None
    if claim.vectors is not None and support.vectors is not None and support_content:
        cols = [i for i, w in enumerate(support.words) if w.content]
        sims = claim.vectors @ support.vectors[cols].T  # claim word x support content word
    ok = [
        w.content
        and (
            _licensed_by_form(w, support_content)
            or (sims is not None and float(sims[i].max()) >= ALIGN_MIN)
        )
        for i, w in enumerate(claim.words)
    ]
    unlicensed = [w.text for w, good in zip(claim.words, ok, strict=True) if w.content and not good]
    reasons = swap_reasons(claim, support) + contrast_reasons(claim, support)
    return Licence(sum(ok) / len(content), unlicensed, list(dict.fromkeys(reasons)))


def _cosine(a: Aligned, i: int, b: Aligned, j: int) -> float | None:
    if a.vectors is None or b.vectors is None:
        return None
    return float(a.vectors[i] @ b.vectors[j])


def _adjacent(text: str, left: Word, right: Word) -> bool:
    """Nothing but spaces or a hyphen between the two words."""
    return left.end <= right.start and not text[left.end : right.start].strip(" -")


def _slot_word(word: Word) -> bool:
    return word.content and word.text not in _LOOSE and not _NUMERIC.search(word.text)


def _same(a: Word, b: Word) -> bool:
    return a.stem == b.stem or variant(a.text, b.text)


def _phrase(aligned: Aligned, i: int, step: int) -> list[Word]:
    """The words running on from word i (step -1: before it, +1: after it) with nothing but
    spaces or hyphens between them: the rest of its phrase."""
    found, ws = [], aligned.words
    j = i
    while 0 <= j + step < len(ws):
        a, b = (ws[j + step], ws[j]) if step < 0 else (ws[j], ws[j + step])
        if not _adjacent(aligned.text, a, b):
            break
        j += step
        found.append(ws[j])
    return found


def swap_reasons(claim: Aligned, support: Aligned) -> list[str]:
    """A claim word in the slot of a different passage word: right before the same word, or
    ending the phrase right after it, where the passage has its own word there more often
    than the claim does ("credit card" for "gift card", "excludes shipping" for "including
    shipping", "the wrong size." for "the wrong item."). A verb after its subject is no slot:
    paraphrases change those freely ("the refund includes" for "the refund covers")."""
    reasons = []
    for side in (1, -1):  # the shared word after the claim word, then before it
        reasons += _Slots.of(claim, support, side).reasons()
    return list(dict.fromkeys(reasons))


# (word, its neighbour on one side, the word's index), as `_slot_pairs` gives them
_Pair = tuple[Word, Word, int]


def _pair_count(pairs: list[_Pair], word: Word, anchor: Word) -> int:
    """How many of the pairs are `word` next to `anchor` (in any form)."""
    return sum(1 for a, b, _ in pairs if _same(a, word) and _same(b, anchor))


@dataclass(frozen=True)
class _Slots:
    """The adjacent word pairs of a claim and a passage sentence on one side: the shared
    word (the anchor) after the claim word (side 1) or before it (side -1)."""

    claim: Aligned
    support: Aligned
    side: int
    claim_pairs: list[_Pair]
    support_pairs: list[_Pair]

    @classmethod
    def of(cls, claim: Aligned, support: Aligned, side: int) -> _Slots:
        return cls(claim, support, side, _slot_pairs(claim, side), _slot_pairs(support, side))

    def reasons(self) -> list[str]:
        """A reason for each passage word a claim word takes the place of (see
        `swap_reasons`), in order, repeats included."""
        reasons = []
        for pair in self.claim_pairs:
            if not self._unlicensed_slot(pair):
                continue
            # "the new email address" keeps "new address": the modifiers before the word
            near = _modifiers(self.claim, pair[2], -self.side)
            for other in self.support_pairs:
                if self._takes_place_of(pair, near, other) and (
                    reason := self._reason(pair, other)
                ):
                    reasons.append(reason)
        return reasons

    def _unlicensed_slot(self, pair: _Pair) -> bool:
        """Whether the claim word of `pair` fills a slot the passage does not license: both
        words are slot words, the word ends its phrase when the anchor is before it, and the
        passage has neither the word nor the word next to the anchor."""
        w, anchor, i = pair
        if not _slot_word(w) or not _slot_word(anchor):
            return False
        if self.side < 0 and not _phrase_final(self.claim, i):
            return False  # after a shared word, only a phrase's last word ("the wrong size.")
        return not (
            _licensed_exactly(w, self.support.words) or _pair_count(self.support_pairs, w, anchor)
        )

    def _takes_place_of(self, pair: _Pair, near: list[Word], other: _Pair) -> bool:
        """Whether the claim word of `pair` takes the place of the passage word of `other`:
        another word (not a number) next to the same anchor, which the passage has there more
        often than the claim, and says more often than the claim; not one of the claim
        word's modifiers (`near`), and when the anchor is before it, ending its phrase."""
        w, anchor, _ = pair
        replaced, s, k = other
        if not _same(s, anchor) or _same(replaced, w) or _NUMERIC.search(replaced.text):
            return False
        if _pair_count(self.support_pairs, replaced, s) <= _pair_count(
            self.claim_pairs, replaced, s
        ):
            return False  # the claim keeps every "gift card" the passage has
        if any(_same(replaced, c) for c in near):
            return False
        if self.side < 0 and not _phrase_final(self.support, k):
            return False
        # the claim says the passage's word as often: moved, not replaced
        return _uses(self.claim, replaced) < _uses(self.support, replaced)

    def _reason(self, pair: _Pair, other: _Pair) -> str | None:
        """Why the claim word may not replace the passage word: it is a contrast, or (a slot
        word, not a synonym) its vector is not close enough; None when it may."""
        w, anchor, i = pair
        replaced, _, k = other
        if are_contrasts(w, replaced):
            return f"says {w.text!r} where the passage says {replaced.text!r}"
        if not _slot_word(replaced) or are_synonyms(w, replaced):
            return None
        sim = _cosine(self.claim, i, self.support, k)
        if sim is None or sim < SWAP_MIN:
            shown = "?" if sim is None else f"{sim:.2f}"
            return (
                f"replaces {replaced.text!r} with {w.text!r} next to {anchor.text!r} "
                f"({shown} < {SWAP_MIN})"
            )
        return None


def _uses(aligned: Aligned, word: Word) -> int:
    return sum(1 for w in aligned.words if _same(w, word))


def _modifiers(aligned: Aligned, i: int, step: int) -> list[Word]:
    """The content words running on from word i with nothing but spaces between them."""
    found = []
    for w in _phrase(aligned, i, step):
        if not w.content:
            break
        found.append(w)
    return found


def _phrase_final(aligned: Aligned, i: int) -> bool:
    """Word i ends its phrase: punctuation or the end of the text follows it."""
    return not _phrase(aligned, i, 1)


def _slot_pairs(aligned: Aligned, side: int) -> list[tuple[Word, Word, int]]:
    """(word, its neighbour on `side`, the word's index) for adjacent word pairs."""
    ws = aligned.words
    pairs = []
    for i in range(len(ws)):
        n = i + side
        if 0 <= n < len(ws):
            left, right = (ws[i], ws[n]) if side > 0 else (ws[n], ws[i])
            if _adjacent(aligned.text, left, right):
                pairs.append((ws[i], ws[n], i))
    return pairs


def contrast_reasons(claim: Aligned, support: Aligned) -> list[str]:
    """A claim word whose curated contrast the passage says instead ("sender" where the
    passage says "recipient"): the claim lacks the passage's word, the passage the claim's."""
    reasons = []
    claim_roots = {root(w.text) for w in claim.words}
    support_roots = {root(w.text) for w in support.words}
    for w in claim.words:
        partners = contrasts_of(w.text) & support_roots
        if not partners or root(w.text) in support_roots:
            continue
        if any(_same(w, s) for s in support.words):
            continue
        for s in support.words:
            said = root(s.text) in claim_roots or any(_same(s, c) for c in claim.words)
            if root(s.text) in partners and not said:
                reasons.append(f"says {w.text!r} where the passage says {s.text!r}")
    return list(dict.fromkeys(reasons))


def _licensed_exactly(word: Word, others: Sequence[Word]) -> bool:
    return any(o.content and (o.stem == word.stem or variant(word.text, o.text)) for o in others)
