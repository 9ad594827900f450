"""Torch reference vectors for the ONNX encoder's equivalence test (test_minilm.py).

    python -m knowledge.tests.minilm_reference   # needs torch + sentence-transformers

Writes `knowledge/tests/data/minilm_reference.npz`: sentence vectors (float16) of demo help
center passages (one longer than the model's 256 word pieces, so truncation is covered) and
development-set questions, and word-piece spans and rows of a few of them, all computed by
sentence-transformers on torch (`minilm.TorchEncoder`), the runtime used before ONNX.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "data" / "minilm_reference.npz"
HELPCENTER = ROOT / "demo" / "helpcenter"
DEV_FAQ = ROOT / "demo" / "dev_faq" / "eval_answers.json"
TOKEN_TEXTS = 5  # the first this many texts also get word-piece vectors


def texts() -> list[str]:
    """Questions first (the word-piece texts come from the front), then passages."""
    cases = json.loads(DEV_FAQ.read_text())["cases"]
    questions = [c["q"] for c in cases if "q" in c][::3][:20]
    passages = []
    for name in sorted(("refunds.md", "orders.md", "payments-and-billing.txt", "summit-club.md")):
        paragraphs = [
            p.strip()
            for p in (HELPCENTER / name).read_text().split("\n\n")
            if len(p.strip()) > 80 and not p.lstrip().startswith("#")
        ]
        passages.extend(paragraphs[:6])
    whole_page = (HELPCENTER / "returns-and-exchanges.md").read_text()  # > 256 word pieces
    return [*questions[:3], *passages[:2], *questions[3:], *passages[2:], whole_page]


def main() -> None:
    from knowledge import minilm

    encoder = minilm.TorchEncoder()
    all_texts = texts()
    vectors = encoder.sentence_vectors(all_texts)
    tokens = encoder.token_vectors(all_texts[:TOKEN_TEXTS])
    FIXTURE.parent.mkdir(exist_ok=True)
    np.savez_compressed(
        FIXTURE,
        texts=np.array(all_texts),
        vectors=vectors.astype(np.float16),
        token_counts=np.array([len(spans) for spans, _ in tokens], dtype=np.int32),
        token_spans=np.array([s for spans, _ in tokens for s in spans], dtype=np.int32),
        token_rows=np.concatenate([rows for _, rows in tokens]).astype(np.float16),
    )
    print(f"wrote {FIXTURE} ({len(all_texts)} texts, {FIXTURE.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
