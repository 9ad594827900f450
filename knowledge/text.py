"""Sentences, words, numbers and policy terms: the text units search, composition and
verification work on. A leaf of knowledge: imports no app."""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import snowballstemmer

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
# "approved" too: a sentence may only call something approved where a passage does (an answer
# never decides a customer's case; the action ledger says what was approved).
POLICY_TERMS = (
    "approved",
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
    "used items",
    "damaged",
    "defective",
)
# A full stop ends a sentence unless it ends a common abbreviation ("e.g. 3.5.3").
_SENTENCE_RE = re.compile(
    r"(?<=[.!?])(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)(?<!\bcf\.)(?<!\bno\.)"
    r"\s+(?=[A-Z0-9\"“(])|\n+"
)
_CITE_RE = re.compile(r"\s*\[(\d{1,2})\]")
_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?")


_MARKER_AFTER_STOP = re.compile(r"([.!?])((?:\s*\[\d{1,2}\])+)")


def split_sentences(text: str, *, verbatim: bool = False) -> list[str]:
    """Split into sentences; a citation marker after the full stop stays with its sentence
    (moved before the stop: "…supported [6]."), unless `verbatim`: then every sentence is a
    substring of `text` (a source passage's footnote marks, "…supported. [6]", stay put)."""
    text = text or ""
    if not verbatim:
        text = _MARKER_AFTER_STOP.sub(r"\2\1", text)
    parts = [p.strip() for p in _SENTENCE_RE.split(text)]
    return [p for p in parts if p]


def cited_indexes(sentence: str) -> list[int]:
    return [int(n) for n in _CITE_RE.findall(sentence)]


def strip_citations(sentence: str) -> str:
    return _CITE_RE.sub("", sentence).strip()


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower().replace("’", "'"))


def words(text: str) -> list[str]:
    """Lowercased word tokens (apostrophes kept: "can't")."""
    return _words(text)


@lru_cache(maxsize=32768)
def content_words(text: str) -> frozenset[str]:
    """The text's stemmed words without stop words and negations. Cached: a help center's
    sentences recur across turns (each turn scores every sentence of 24 passages)."""
    return frozenset(_stem(w) for w in _words(text) if w not in STOPWORDS and w not in NEGATIONS)


def stem(word: str) -> str:
    """The word's English Snowball stem: "shipping" -> "ship", and "expire", "expires" and
    "expired" all -> "expir" (a customer's word meets the page's inflection of it)."""
    return _stem(word)


# A Snowball stemmer keeps the word being stemmed in its own attributes: one shared by two
# threads stems one thread's word with the other's state (wrong stems, IndexError,
# AssertionError; seen as turns failing `internal` under load). One per thread.
_stemmers = threading.local()


def _stemmer():
    stemmer = getattr(_stemmers, "english", None)
    if stemmer is None:
        stemmer = _stemmers.english = snowballstemmer.stemmer("english")
    return stemmer


# Longer "words" (hashes, base64, a page's junk) are no English word: left as they are and
# never cached, so no text can fill the cache with megabyte keys.
_MAX_STEM_CHARS = 40


def _stem(word: str) -> str:
    return word if len(word) > _MAX_STEM_CHARS else _stem_cached(word)


@lru_cache(maxsize=65536)
def _stem_cached(word: str) -> str:
    # Measured against the suffix stripper it replaces (-ing, -ed, -es, -s), which left
    # "expire"/"expires", "change"/"changes", "delete"/"deleted" apart: on the five
    # development sets and the demo one key fact more, none fewer (docs/reports/answers.md,
    # Round 6). Cached: the pure-Python stemmer costs ~30 us a word, a hit ~0.1 us.
    return _stemmer().stemWord(word)


def numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER_RE.findall(text)}


def _term_pattern(term: str) -> re.Pattern:
    """A policy term, allowing one word inside a two-word term ("prepaid return label")."""
    parts = [re.escape(p) for p in term.split()]
    return re.compile(r"\b" + r"(?:\s+\w+)?\s+".join(parts) + r"\b")


_TERM_PATTERNS = {t: _term_pattern(t) for t in POLICY_TERMS}


def policy_terms(text: str) -> set[str]:
    low = text.lower().replace("’", "'")
    return {t for t, pattern in _TERM_PATTERNS.items() if pattern.search(low)}


def has_negation(text: str) -> bool:
    words = set(_words(text))
    return bool(words & NEGATIONS) or "n't" in text.lower()
