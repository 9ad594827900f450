"""Retrieval evaluation: recall@1/@5, MRR and latency of full-text, vector and hybrid search."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from knowledge.embeddings import embed_query, embed_texts
from knowledge.selectors import Audience, search_passages
from supportbot.models import Tenant

MODES = ("fulltext", "vector", "hybrid")
DEPTH = 10


@dataclass(frozen=True)
class Question:
    q: str
    document: str
    heading: str | None = None
    audience: Audience = field(default_factory=Audience.customer)

    @classmethod
    def from_dict(cls, item: dict) -> Question:
        if item.get("audience") == "agent":
            audience = Audience.agent()
        else:
            audience = Audience.customer(item.get("segments", ()))
        return cls(
            q=item["q"], document=item["document"], heading=item.get("heading"), audience=audience
        )


@dataclass
class ModeReport:
    mode: str
    ranks: list[int | None] = field(default_factory=list)  # 1-based rank of the first hit
    latencies_ms: list[float] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)

    def recall_at(self, k: int) -> float:
        return sum(1 for r in self.ranks if r is not None and r <= k) / max(1, len(self.ranks))

    @property
    def mrr(self) -> float:
        return sum(1 / r for r in self.ranks if r is not None) / max(1, len(self.ranks))

    def latency(self, pct: int) -> float:
        return percentile(self.latencies_ms, pct)


def evaluate(*, tenant: Tenant, questions: list[Question]) -> list[ModeReport]:
    """Run every question in every mode; latency excludes the (shared, cached) query embedding."""
    embed_query("warm up the embedding model")
    reports = []
    for mode in MODES:
        report = ModeReport(mode=mode)
        for question in questions:
            result = search_passages(
                tenant=tenant, query=question.q, audience=question.audience, limit=DEPTH, mode=mode
            )
            report.latencies_ms.append(result.timings_ms["total"] - result.timings_ms["embed"])
            rank = next(
                (
                    i
                    for i, p in enumerate(result.passages, start=1)
                    if p.title == question.document
                    and (question.heading is None or question.heading in p.heading_path)
                ),
                None,
            )
            report.ranks.append(rank)
            if rank is None or rank > 5:
                report.misses.append(question.q)
        reports.append(report)
    return reports


def embedding_latencies(texts: list[str]) -> list[float]:
    """Time uncached single-query embeddings (what a new question costs before search)."""
    out = []
    for text in texts:
        started = time.perf_counter()
        embed_texts([text])
        out.append((time.perf_counter() - started) * 1000)
    return out


def percentile(values: list[float], pct: int) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]
