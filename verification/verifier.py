"""Check claims against retrieved passages, one passage sentence at a time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from knowledge.embeddings import embed_texts, embed_tokens, token_embeddings_available
from knowledge.text import (
    cited_indexes,
    content_words,
    policy_terms,
    split_sentences,
    strip_citations,
)
from verification.alignment import Aligned, TokenEmbed, WordVectorCache, licence
from verification.facts import fact_reasons

LEXICAL_MIN = 0.6  # share of the claim's content words the passage sentence licenses
EMBED_MIN = 0.45
UNLICENSED_MAX = 4  # claim content words that nothing in the passage sentence licenses
MIN_CLAIM_WORDS = 3  # "Order A-1042." is a fragment, not an answer
SUPPORT_SENTENCES = 3  # the passage sentences closest to a claim that may support it


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


def _check_against(
    sentence: str, support: str, semantic: float, claim: Aligned, passage: Aligned
) -> tuple[bool, float, list[str]]:
    """Check one claim against one passage sentence (the unit of support)."""
    reasons = []
    words = content_words(sentence)
    licensed = licence(claim, passage)
    lexical = licensed.recall
    if len(words) < MIN_CLAIM_WORDS:
        reasons.append("too short to be a claim")
    if lexical < LEXICAL_MIN:
        reasons.append(f"lexical {lexical:.2f} < {LEXICAL_MIN}")
    if len(licensed.unlicensed) > UNLICENSED_MAX:
        reasons.append(f"words the passage does not license: {licensed.unlicensed}")
    reasons += licensed.reasons
    if semantic < EMBED_MIN:
        reasons.append(f"semantic {semantic:.2f} < {EMBED_MIN}")
    missing_terms = policy_terms(sentence) - policy_terms(support)
    if missing_terms:
        reasons.append(f"policy terms not in passage: {sorted(missing_terms)}")
    reasons += fact_reasons(sentence, support)
    return not reasons, lexical, reasons


_DEFAULT: TokenEmbed = embed_tokens
_SHARED_WORD_VECTORS = WordVectorCache(embed_tokens)


def _word_vectors(token_embed: TokenEmbed | None) -> WordVectorCache:
    if token_embed is _DEFAULT:
        if not token_embeddings_available():  # a remote embedding backend: forms and lists only
            return WordVectorCache(None)
        return _SHARED_WORD_VECTORS
    return WordVectorCache(token_embed)


class PassageVerifier:
    """Checks sentences against a fixed set of retrieved passages (embedded once).

    `token_embed` gives contextual word-piece vectors (the local MiniLM by default) for aligning
    a claim's words to the passage's; None checks word forms and the curated lists only.
    """

    def __init__(
        self,
        passage_texts: Sequence[str],
        *,
        embed: Callable[[list[str]], list[list[float]]] = embed_texts,
        token_embed: TokenEmbed | None = _DEFAULT,
    ) -> None:
        self.passage_texts = list(passage_texts)
        self.embed = embed
        self.word_vectors = _word_vectors(token_embed)
        groups = [split_sentences(p) or [p] for p in self.passage_texts]
        self.flat = [s for group in groups for s in group]
        self.owners = [i for i, group in enumerate(groups) for _ in group]
        self.flat_vecs = (
            np.asarray(embed(self.flat), dtype=np.float32) if self.flat else np.zeros((0, 384))
        )
        # Word vectors of a passage sentence are computed when a claim is first compared with
        # it (the closest few per passage), not for every sentence up front.
        self._flat_words: dict[int, Aligned] = {}

    def _candidates(self, raw: str, sims: np.ndarray) -> list[tuple[int, int]]:
        """(passage, passage sentence) pairs a claim is compared with, closest first: each
        candidate passage's SUPPORT_SENTENCES closest sentences (only the cited passages when
        the claim cites any)."""
        n = len(self.passage_texts)
        cited = [i for i in cited_indexes(raw) if 1 <= i <= n]
        candidates = [i - 1 for i in cited] or list(range(n))
        pairs = []
        for p in candidates:
            cols = sorted(
                (j for j, owner in enumerate(self.owners) if owner == p), key=lambda c: -sims[c]
            )
            pairs += [(p, j) for j in cols[:SUPPORT_SENTENCES]]
        pairs.sort(key=lambda pj: -sims[pj[1]])
        return pairs

    def check_many(self, raw_sentences: Sequence[str]) -> list[SentenceCheck]:
        clean = [strip_citations(s) for s in raw_sentences]
        if not clean:
            return []
        if not self.passage_texts:
            return [SentenceCheck(c, False, None, reasons=["no passages"]) for c in clean]
        sent_vecs = np.asarray(self.embed(clean), dtype=np.float32)
        sims = sent_vecs @ self.flat_vecs.T  # normalized embeddings: cosine
        pairs = [self._candidates(raw, sims[row]) for row, raw in enumerate(raw_sentences)]
        # The passage sentences `_check` may compare: the closest pair, and every pair close
        # enough; their word vectors and the claims' in one batch.
        needed = {
            j
            for row, ps in enumerate(pairs)
            for k, (_, j) in enumerate(ps)
            if k == 0 or sims[row][j] >= EMBED_MIN
        }
        wanted = sorted(j for j in needed if j not in self._flat_words)
        vectors = self.word_vectors([*clean, *(self.flat[j] for j in wanted)])
        aligned = vectors[: len(clean)]
        self._flat_words.update(zip(wanted, vectors[len(clean) :], strict=True))
        return [
            self._check(raw, sentence, sims[row], aligned[row], pairs[row])
            for row, (raw, sentence) in enumerate(zip(raw_sentences, clean, strict=True))
        ]

    def check(self, raw_sentence: str) -> SentenceCheck:
        return self.check_many([raw_sentence])[0]

    def _check(
        self,
        raw: str,
        sentence: str,
        sims: np.ndarray,
        claim: Aligned,
        pairs: list[tuple[int, int]],
    ) -> SentenceCheck:
        n = len(self.passage_texts)
        best: SentenceCheck | None = None
        for p, j in pairs:
            if best is not None and sims[j] < EMBED_MIN:
                break  # it cannot be supported, nor outrank the closest sentence already checked
            ok, lexical, reasons = _check_against(
                sentence, self.flat[j], float(sims[j]), claim, self._flat_words[j]
            )
            check = SentenceCheck(sentence, ok, p + 1, lexical, float(sims[j]), reasons)
            if best is None or (check.supported, check.semantic) > (best.supported, best.semantic):
                best = check
            if ok:
                break  # the closest supporting sentence: every later one is less close
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
