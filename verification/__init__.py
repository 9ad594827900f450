"""Answer verification: every sentence must be supported by a passage that was retrieved.

A sentence (a claim) is supported when one sentence of a retrieved passage
- holds most of the claim's content words (lexical recall),
- means nearly the same (embedding cosine),
- states every number and every policy term of the claim exactly, and
- has the same polarity (the claim adds or drops no negation).
The unit of support is one passage sentence, so a claim cannot stitch "opened items" from one
sentence to "full refund" from another.
Unsupported sentences are dropped; the caller falls back to an extractive answer when too
little survives. Citations are only ever to retrieved passages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from knowledge.embeddings import embed_texts

LEXICAL_MIN = 0.6
EMBED_MIN = 0.55
MIN_CLAIM_WORDS = 3  # "Order A-1042." is a fragment, not an answer
SUPPORT_SENTENCES = 3  # the passage sentences closest to a claim that may support it

_STOPWORDS_TEXT = """
a an the and or but if then so of to in on at by for with from as is are was were be been being
it its this that these those you your yours we our us i me my he she they them their do does did
can could will would should may might must shall have has had there here what which who whom
when where why how all any each more most some such than too very just also into about over
after before again further once only own same both few other out up down off please thanks
thank hi hello yes sure okay ok get got let lets
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "cannot",
        "can't",
        "won't",
        "don't",
        "doesn't",
        "isn't",
        "aren't",
        "without",
        "non",
        "nor",
        "none",
    }
)
# Terms whose presence changes what a customer is entitled to: they must be quoted exactly.
POLICY_TERMS = (
    "full refund",
    "partial refund",
    "store credit",
    "gift card",
    "exchange",
    "free shipping",
    "free return",
    "prepaid label",
    "restocking fee",
    "final sale",
    "non-refundable",
    "original payment method",
    "lifetime",
    "warranty",
    "business days",
    "calendar days",
    "express",
    "overnight",
    "international",
    "cash",
    "guarantee",
    "any reason",
    "no questions asked",
    "unopened",
    "opened",
    "used",
    "damaged",
    "defective",
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])|\n+")
_CITE_RE = re.compile(r"\s*\[(\d{1,2})\]")
_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?")


_MARKER_AFTER_STOP = re.compile(r"([.!?])((?:\s*\[\d{1,2}\])+)")


def split_sentences(text: str) -> list[str]:
    """Split into sentences; a citation marker after the full stop stays with its sentence."""
    text = _MARKER_AFTER_STOP.sub(r"\2\1", text or "")
    parts = [p.strip() for p in _SENTENCE_RE.split(text)]
    return [p for p in parts if p]


def cited_indexes(sentence: str) -> list[int]:
    return [int(n) for n in _CITE_RE.findall(sentence)]


def strip_citations(sentence: str) -> str:
    return _CITE_RE.sub("", sentence).strip()


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower().replace("’", "'"))


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in _words(text) if w not in STOPWORDS and w not in NEGATIONS}


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2]:
                word = word[:-1]  # shipping -> ship, stopped -> stop
            return word
    return word


def numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER_RE.findall(text)}


def policy_terms(text: str) -> set[str]:
    low = text.lower()
    return {t for t in POLICY_TERMS if re.search(rf"\b{re.escape(t)}\b", low)}


def has_negation(text: str) -> bool:
    words = set(_words(text))
    return bool(words & NEGATIONS) or "n't" in text.lower()


@dataclass
class SentenceCheck:
    sentence: str
    supported: bool
    passage_index: int | None  # 1-based index into the passages given
    lexical: float = 0.0
    semantic: float = 0.0
    reasons: list[str] = field(default_factory=list)


@dataclass
class Verification:
    checks: list[SentenceCheck]

    @property
    def supported(self) -> list[SentenceCheck]:
        return [c for c in self.checks if c.supported]

    @property
    def unsupported(self) -> list[SentenceCheck]:
        return [c for c in self.checks if not c.supported]

    def text(self) -> str:
        """The supported sentences, each ending with its citation marker."""
        return " ".join(f"{c.sentence} [{c.passage_index}]" for c in self.supported)

    def cited_indexes(self) -> list[int]:
        seen: list[int] = []
        for c in self.supported:
            if c.passage_index is not None and c.passage_index not in seen:
                seen.append(c.passage_index)
        return seen


def _check_against(sentence: str, support: str, semantic: float) -> tuple[bool, float, list[str]]:
    """Check one claim against one passage sentence (the unit of support)."""
    reasons = []
    words = content_words(sentence)
    lexical = len(words & content_words(support)) / len(words) if words else 0.0
    if len(words) < MIN_CLAIM_WORDS:
        reasons.append("too short to be a claim")
    if lexical < LEXICAL_MIN:
        reasons.append(f"lexical {lexical:.2f} < {LEXICAL_MIN}")
    if semantic < EMBED_MIN:
        reasons.append(f"semantic {semantic:.2f} < {EMBED_MIN}")
    missing_numbers = numbers(sentence) - numbers(support)
    if missing_numbers:
        reasons.append(f"numbers not in passage: {sorted(missing_numbers)}")
    missing_terms = policy_terms(sentence) - policy_terms(support)
    if missing_terms:
        reasons.append(f"policy terms not in passage: {sorted(missing_terms)}")
    if has_negation(sentence) != has_negation(support):
        reasons.append("negation differs from the passage")
    return not reasons, lexical, reasons


class PassageVerifier:
    """Checks sentences against a fixed set of retrieved passages (embedded once)."""

    def __init__(
        self,
        passage_texts: Sequence[str],
        *,
        embed: Callable[[list[str]], list[list[float]]] = embed_texts,
    ) -> None:
        self.passage_texts = list(passage_texts)
        self.embed = embed
        groups = [split_sentences(p) or [p] for p in self.passage_texts]
        self.flat = [s for group in groups for s in group]
        self.owners = [i for i, group in enumerate(groups) for _ in group]
        self.flat_vecs = (
            np.asarray(embed(self.flat), dtype=np.float32) if self.flat else np.zeros((0, 384))
        )

    def check_many(self, raw_sentences: Sequence[str]) -> list[SentenceCheck]:
        clean = [strip_citations(s) for s in raw_sentences]
        if not clean:
            return []
        if not self.passage_texts:
            return [SentenceCheck(c, False, None, reasons=["no passages"]) for c in clean]
        sent_vecs = np.asarray(self.embed(clean), dtype=np.float32)
        sims = sent_vecs @ self.flat_vecs.T  # normalized embeddings: cosine
        return [
            self._check(raw, sentence, sims[row])
            for row, (raw, sentence) in enumerate(zip(raw_sentences, clean, strict=True))
        ]

    def check(self, raw_sentence: str) -> SentenceCheck:
        return self.check_many([raw_sentence])[0]

    def _check(self, raw: str, sentence: str, sims: np.ndarray) -> SentenceCheck:
        n = len(self.passage_texts)
        cited = [i for i in cited_indexes(raw) if 1 <= i <= n]
        candidates = [i - 1 for i in cited] or list(range(n))
        best: SentenceCheck | None = None
        for p in candidates:
            cols = sorted(
                (j for j, owner in enumerate(self.owners) if owner == p), key=lambda c: -sims[c]
            )
            for j in cols[:SUPPORT_SENTENCES]:
                ok, lexical, reasons = _check_against(sentence, self.flat[j], float(sims[j]))
                check = SentenceCheck(sentence, ok, p + 1, lexical, float(sims[j]), reasons)
                if best is None or (check.supported, check.semantic) > (
                    best.supported,
                    best.semantic,
                ):
                    best = check
        if best is None:  # candidates is never empty when passages exist
            raise ValueError("no candidate passages")
        foreign = [i for i in cited_indexes(raw) if not 1 <= i <= n]
        if foreign:
            best.supported = False
            best.reasons.append(f"cites passages that were not retrieved: {foreign}")
        return best


def verify_answer(
    answer: str,
    passage_texts: Sequence[str],
    *,
    embed: Callable[[list[str]], list[list[float]]] = embed_texts,
) -> Verification:
    """Check each sentence of `answer` against the retrieved passages (1-based [n] markers)."""
    verifier = PassageVerifier(passage_texts, embed=embed)
    return Verification(checks=verifier.check_many(split_sentences(answer)))


def best_sentences(
    query: str,
    passage_text: str,
    *,
    limit: int = 2,
    embed: Callable[[list[str]], list[list[float]]] = embed_texts,
) -> list[str]:
    """The sentences of a passage closest to the query, in their original order."""
    sentences = [s for s in split_sentences(passage_text) if len(content_words(s)) >= 2]
    if len(sentences) <= limit:
        return sentences or [passage_text.strip()]
    vectors = np.asarray(embed([query, *sentences]), dtype=np.float32)
    query_words = content_words(query)
    scores = []
    for i, s in enumerate(sentences):
        overlap = len(query_words & content_words(s)) / (len(query_words) or 1)
        scores.append(float(vectors[0] @ vectors[i + 1]) + 0.3 * overlap)
    chosen = sorted(sorted(range(len(sentences)), key=lambda i: -scores[i])[:limit])
    return [sentences[i] for i in chosen]


ELLIPSIS = " … "


def _squash(text: str) -> str:
    return " ".join(text.replace("’", "'").split())


def join_quote(passage_text: str, sentences: Sequence[str]) -> str:
    """Join quoted sentences: a space where they are adjacent in the passage, else " … "."""
    source = _squash(passage_text)
    quote = ""
    for sentence in sentences:
        if not quote:
            quote = sentence
        elif _squash(f"{quote} {sentence}") in source:
            quote = f"{quote} {sentence}"
        else:
            quote = f"{quote}{ELLIPSIS}{sentence}"
    return quote


def quote_is_verbatim(quote: str, passage_text: str) -> list[str]:
    """The pieces of a quote that do not occur verbatim in the passage (empty when faithful)."""
    source = _squash(passage_text)
    return [piece for piece in quote.split(ELLIPSIS.strip()) if _squash(piece) not in source]


RELEVANCE_RATIO = 0.8


class RelevanceGate:
    """Does a (verified) sentence answer the question about as well as the best passage sentence?

    True-but-beside-the-point sentences ("This page explains …") pass verification; a small
    model writes many. A sentence is released only when its relevance to the question reaches
    RELEVANCE_RATIO of the most relevant passage sentence (what the extractive answer would
    quote), scored as in `best_sentences`: cosine + 0.3 × question-word overlap.
    """

    def __init__(
        self,
        query: str,
        passage_texts: Sequence[str],
        *,
        embed: Callable[[list[str]], list[list[float]]] = embed_texts,
    ) -> None:
        self.embed = embed
        self.query_words = content_words(query)
        candidates = [
            s for p in passage_texts for s in split_sentences(p) if len(content_words(s)) >= 2
        ]
        vectors = np.asarray(embed([query, *candidates]), dtype=np.float32)
        self.query_vec = vectors[0]
        self.bar = max(
            (self._score(c, vectors[i + 1]) for i, c in enumerate(candidates)), default=0.0
        )

    def _score(self, sentence: str, vector: np.ndarray) -> float:
        overlap = len(self.query_words & content_words(sentence)) / (len(self.query_words) or 1)
        return float(self.query_vec @ vector) + 0.3 * overlap

    def relevant(self, sentences: Sequence[str]) -> list[bool]:
        if not sentences:
            return []
        vectors = np.asarray(self.embed(list(sentences)), dtype=np.float32)
        return [
            self._score(s, vectors[i]) >= RELEVANCE_RATIO * self.bar
            for i, s in enumerate(sentences)
        ]
