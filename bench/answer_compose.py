"""CPU per extractive answer: main's composition (two best sentences of the best passage, one
of a second) against the contiguous-window composition, on the development sets' questions.

    SUPPORTBOT_VAR_DIR=... .venv/bin/python -m bench.answer_compose [--corpus dev-faq]

The tenants must be loaded already (`manage.py eval_answers --corpus dev-faq` does it). Each
question is searched once; then each composition runs with a fresh per-turn embedder over an
empty process cache (cold: every passage sentence embedded, as for a tenant's first
questions) and over the warm process cache (what most turns see). Reports the texts embedded
and the milliseconds per answer (median, p95). Figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = {
    "dev-faq": ROOT / "demo" / "dev_faq" / "eval_answers.json",
    "dev-debian": ROOT / "demo" / "dev_debian_faq" / "eval_answers.json",
}


def _main_composition(query, passages, embed):
    """The composition main shipped (kept here only to measure against)."""
    from verification import best_sentences, join_quote

    ranked = sorted(passages, key=lambda p: (-p.evidence, -p.score))
    chosen = [ranked[0]]
    if len(ranked) > 1 and ranked[1].evidence >= 0.9 * ranked[0].evidence:
        chosen.append(ranked[1])
    return [
        join_quote(p.text, best_sentences(query, p.text, limit=2 if n == 1 else 1, embed=embed))
        for n, p in enumerate(chosen, start=1)
    ]


def run(corpus: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportbot.settings")
    import django

    django.setup()
    from conversations.orchestrator.base import SentenceVectors, TurnEmbedder
    from conversations.orchestrator.extractive import extractive_draft
    from knowledge import selectors
    from supportbot.models import Tenant

    data = json.loads(SETS[corpus].read_text())
    tenant = Tenant.objects.get(slug=data["tenant"])
    audience = selectors.Audience.customer()
    questions = [c["q"] for c in data["cases"] if c.get("expect") == "answer"]
    searched = []
    for q in questions:
        result = selectors.search_passages(tenant=tenant, query=q, audience=audience, limit=8)
        found = [p for p in result.passages if p.evidence > 0]
        if result.strength == "strong" and found:
            searched.append((q, found))
    report = {"questions": len(searched)}
    for name, compose in (
        ("main", lambda q, ps, e: _main_composition(q, ps[:4], e)),
        ("window", lambda q, ps, e: extractive_draft(query=q, passages=ps, embed=e)),
    ):
        for cache in ("cold", "warm"):
            shared = SentenceVectors(20000)
            if cache == "warm":
                for q, ps in searched:  # fill the process cache as earlier turns would
                    compose(q, ps, TurnEmbedder(shared=shared))
            times, embedded = [], []
            for q, ps in searched:
                embedder = TurnEmbedder(
                    shared=SentenceVectors(20000) if cache == "cold" else shared
                )
                started = time.perf_counter()
                compose(q, ps, embedder)
                times.append((time.perf_counter() - started) * 1000)
                embedded.append(embedder.computed)
            times.sort()
            report[f"{name} {cache}"] = {
                "ms median": round(statistics.median(times), 1),
                "ms p95": round(times[int(0.95 * (len(times) - 1))], 1),
                "texts embedded (mean)": round(statistics.mean(embedded), 1),
            }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default="dev-faq", choices=sorted(SETS))
    args = parser.parse_args()
    print(json.dumps({"load average": os.getloadavg(), **run(args.corpus)}, indent=1))
