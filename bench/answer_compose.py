"""CPU per extractive answer: its passages' sentences read as stored at indexing
(`knowledge.sentences`, what a turn does) against embedded when the turn runs (passages
indexed before the vectors were stored), on the development sets' questions.

    SUPPORTBOT_VAR_DIR=... .venv/bin/python -m bench.answer_compose [--corpus dev-faq]

The tenants must be loaded already (`manage.py eval_answers --corpus dev-faq` does it) and
their passages given their vectors (`manage.py reindex_outdated`). Each question is searched
once; then each composition runs with a fresh per-turn embedder over an empty process cache
(cold: a tenant's first questions) and over the warm process cache (what most turns see).
Reports the texts embedded and the milliseconds per answer (median, p95), and whether both
ways wrote the same replies. Figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = {
    "dev-faq": ROOT / "demo" / "dev_faq" / "eval_answers.json",
    "dev-debian": ROOT / "demo" / "dev_debian_faq" / "eval_answers.json",
    "dev-keepassxc": ROOT / "demo" / "dev_keepassxc_docs" / "eval_answers.json",
}


def run(corpus: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from chat.orchestrator.base import SentenceVectors, TurnEmbedder
    from chat.orchestrator.extractive import extractive_draft
    from knowledge import selectors
    from supportbot.models import Tenant

    data = json.loads(SETS[corpus].read_text())
    tenant = Tenant.objects.get(slug=data["tenant"])
    audience = selectors.Audience.customer()
    questions = [c["q"] for c in data["cases"] if c.get("expect") == "answer"]
    searched = []
    for q in questions:
        result = selectors.search_passages(
            tenant=tenant, query=q, audience=audience, limit=8, sentence_vectors=True
        )
        found = [p for p in result.passages if p.evidence > 0]
        if result.strength == "strong" and found:
            searched.append((q, found))
    report = {
        "questions": len(searched),
        "passages with stored vectors": sum(
            1 for _, ps in searched for p in ps if p.sentence_vectors
        ),
        "passages": sum(len(ps) for _, ps in searched),
    }
    texts = {}
    for name in ("stored", "embedded"):
        runs = [
            (q, ps if name == "stored" else [replace(p, sentence_vectors=b"") for p in ps])
            for q, ps in searched
        ]
        for cache in ("cold", "warm"):
            shared = SentenceVectors(20000)
            if cache == "warm":
                for q, ps in runs:  # fill the process cache as earlier turns would
                    extractive_draft(query=q, passages=ps, embed=TurnEmbedder(shared=shared))
            times, embedded = [], []
            for q, ps in runs:
                embedder = TurnEmbedder(
                    shared=SentenceVectors(20000) if cache == "cold" else shared
                )
                started = time.perf_counter()
                draft = extractive_draft(query=q, passages=ps, embed=embedder)
                times.append((time.perf_counter() - started) * 1000)
                embedded.append(embedder.computed)
                texts.setdefault(name, []).append(draft.text)
            times.sort()
            report[f"{name} {cache}"] = {
                "ms median": round(statistics.median(times), 1),
                "ms p95": round(times[int(0.95 * (len(times) - 1))], 1),
                "texts embedded (mean)": round(statistics.mean(embedded), 1),
            }
    report["replies differing"] = sum(
        a != b for a, b in zip(texts["stored"], texts["embedded"], strict=True)
    )
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default="dev-faq", choices=sorted(SETS))
    args = parser.parse_args()
    print(json.dumps({"load average": os.getloadavg(), **run(args.corpus)}, indent=1))
