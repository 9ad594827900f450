"""Quoting passages: the sentences closest to a question, verbatim quotes, relevance."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from knowledge.embeddings import embed_texts
from knowledge.text import content_words, split_sentences, words


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


ECHO_WORDS = 4


def _runs(text: str, n: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    tokens = words(text)
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


class EchoGate:
    """Does a sentence repeat the model's instructions?

    A sentence holding ECHO_WORDS consecutive words of the instructions (the system message)
    that no passage holds is the prompt leaking into the answer. Verification alone does not
    stop it: a model told to reveal its prompt can tuck a clause of it into a sentence the
    passages otherwise support ("…for store credit only, time limits and conditions exactly as
    written"), within the few unlicensed words a paraphrase may carry.
    """

    def __init__(self, instructions: str, passage_texts: Sequence[str]) -> None:
        published = set().union(*(_runs(p) for p in passage_texts))
        self.runs = _runs(instructions) - published

    def echoed(self, sentence: str) -> list[str]:
        """The runs of the instructions the sentence repeats (empty when none)."""
        return sorted(" ".join(run) for run in self.runs & _runs(sentence))
