"""Verifier calibration: passages with a faithful and an unfaithful paraphrase each.

A calibration file is JSONL, one object per line with `passage`, `faithful` and `unfaithful`
(required) and `kind` (what the unfaithful one changed: number, negation, condition, name,
scope), `split` ("dev" to tune on, "held-out" to report) and `id`, `source` (optional).
A paraphrase is accepted when every one of its sentences is supported by the passage. As a
control, each passage is also checked against the faithful paraphrase of another passage.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from knowledge.embeddings import embed_texts, embed_tokens
from knowledge.text import split_sentences
from supportbot.errors import ApplicationError
from verification.alignment import TokenEmbed
from verification.verifier import PassageVerifier

REQUIRED = ("passage", "faithful", "unfaithful")


@dataclass
class Triple:
    passage: str
    faithful: str
    unfaithful: str
    kind: str = "unlabelled"
    split: str = "all"
    id: str = ""
    source: str = ""


@dataclass
class Outcome:
    triple: Triple
    faithful_accepted: bool
    unfaithful_accepted: bool
    unrelated_accepted: bool = False  # another passage's faithful paraphrase (a control)
    faithful_reasons: list[str] = field(default_factory=list)
    unfaithful_reasons: list[str] = field(default_factory=list)


@dataclass
class Report:
    outcomes: list[Outcome]
    sentences: int
    check_seconds: float  # checking claims against an already embedded passage

    def rate(self, rows: list[Outcome], which: str) -> tuple[int, int]:
        return sum(getattr(o, f"{which}_accepted") for o in rows), len(rows)

    def by(self, key: str) -> dict[str, list[Outcome]]:
        groups: dict[str, list[Outcome]] = defaultdict(list)
        for o in self.outcomes:
            groups[getattr(o.triple, key)].append(o)
        return dict(sorted(groups.items()))

    @property
    def ms_per_sentence(self) -> float:
        return 1000 * self.check_seconds / max(1, self.sentences)


def triples_load(path: Path) -> list[Triple]:
    """Read a calibration JSONL file; raise ApplicationError naming the bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ApplicationError(f"{path}: not a readable UTF-8 file ({exc}).") from exc
    triples = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ApplicationError(f"{path.name} line {n}: not JSON ({exc.msg}).") from exc
        if not isinstance(raw, dict):
            raise ApplicationError(f"{path.name} line {n}: expected an object.")
        for key in REQUIRED:
            if not isinstance(raw.get(key), str) or not raw[key].strip():
                raise ApplicationError(f"{path.name} line {n}: {key!r} must be a non-empty string.")
        extra = {k: str(raw[k]) for k in ("kind", "split", "id", "source") if raw.get(k)}
        triples.append(Triple(**{k: raw[k] for k in REQUIRED}, **extra))
    if not triples:
        raise ApplicationError(f"{path.name}: no triples.")
    return triples


def _accepted(verifier: PassageVerifier, text: str) -> tuple[bool, list[str], int]:
    sentences = split_sentences(text)
    checks = verifier.check_many(sentences)
    reasons = [r for c in checks if not c.supported for r in c.reasons]
    return bool(checks) and all(c.supported for c in checks), reasons, len(sentences)


def _other(triples: list[Triple], n: int) -> Triple | None:
    """A triple about another passage, half the file away (the unrelated control)."""
    for step in range(len(triples) // 2, len(triples)):
        other = triples[(n + step) % len(triples)]
        if other.passage != triples[n].passage:
            return other
    return None


def calibrate(
    triples: list[Triple],
    *,
    embed: Callable[[list[str]], list[list[float]]] = embed_texts,
    token_embed: TokenEmbed | None = embed_tokens,
) -> Report:
    """Check every faithful and unfaithful paraphrase against its own passage."""
    outcomes, sentences, seconds = [], 0, 0.0
    for n, triple in enumerate(triples):
        verifier = PassageVerifier([triple.passage], embed=embed, token_embed=token_embed)
        started = time.perf_counter()
        ok_f, reasons_f, n_f = _accepted(verifier, triple.faithful)
        ok_u, reasons_u, n_u = _accepted(verifier, triple.unfaithful)
        seconds += time.perf_counter() - started
        sentences += n_f + n_u
        other = _other(triples, n)
        ok_x = _accepted(verifier, other.faithful)[0] if other is not None else False
        outcomes.append(Outcome(triple, ok_f, ok_u, ok_x, reasons_f, reasons_u))
    return Report(outcomes=outcomes, sentences=sentences, check_seconds=seconds)
