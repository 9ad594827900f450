"""Sentence vectors of a passage, embedded once when the passage is indexed.

An extractive reply scores every sentence of its first passages against the question
(`verification.compose`); embedding them when the turn runs cost about 8 ms a
sentence on a 2-core CPU, some 40 sentences on a turn whose passages no turn had quoted yet.
Indexing embeds them once and stores them beside the passage (float16, one row per sentence,
in the order `passage_sentences` splits the passage), and a turn reads them with its search.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from knowledge.embeddings import EMBEDDING_DIMENSIONS, embed_texts
from knowledge.text import split_sentences

DTYPE = np.float16


def passage_sentences(text: str) -> list[str]:
    """The passage's sentences, verbatim, as the answer composer splits them."""
    return split_sentences(text, verbatim=True)


def sentence_vectors_embed(
    texts: list[str], *, embed: Callable[[list[str]], list[list[float]]] | None = None
) -> list[bytes]:
    """Embed every sentence of each text (one call for all); one blob per text."""
    embed = embed or embed_texts
    sentences = [passage_sentences(t) for t in texts]
    flat = [s for group in sentences for s in group]
    vectors = np.asarray(embed(flat) if flat else [], dtype=DTYPE)
    vectors = vectors.reshape(len(flat), EMBEDDING_DIMENSIONS)
    blobs, at = [], 0
    for group in sentences:
        blobs.append(vectors[at : at + len(group)].tobytes())
        at += len(group)
    return blobs


def sentence_vectors_read(text: str, blob: bytes | memoryview | None) -> dict[str, np.ndarray]:
    """Each sentence of `text` with its stored vector (float32); empty when nothing is stored
    or the blob does not fit the sentences (stored before the splitter changed). Do not
    modify the result: it is shared (a tenant's passages recur across turns)."""
    if not blob or len(blob) % np.dtype(DTYPE).itemsize:
        return {}
    return _read(text, bytes(blob))


@lru_cache(maxsize=512)  # ~30 KB each
def _read(text: str, blob: bytes) -> dict[str, np.ndarray]:
    matrix = np.frombuffer(blob, dtype=DTYPE)
    sentences = passage_sentences(text)
    if not sentences or matrix.size != len(sentences) * EMBEDDING_DIMENSIONS:
        return {}
    rows = matrix.reshape(len(sentences), EMBEDDING_DIMENSIONS).astype(np.float32)
    return dict(zip(sentences, rows, strict=True))
