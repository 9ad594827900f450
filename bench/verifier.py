"""Cost of answer verification on the chat path (issue 12 item 4).

    python -m bench.verifier [--rounds 16]

Each round builds a `PassageVerifier` over five help-center passages (sentence vectors and
contextual word vectors of every passage sentence, as a turn does before generating), then
checks a four-sentence answer in one `check_many` call, as the chat path checks the sentences
that arrived together. Every round uses texts no earlier round used, so no cache helps; the
"warm" build re-verifies the previous round's passages (the word vectors of recurring passage
sentences are cached in the process). Writes bench/out/verifier.md with the load average:
figures depend on what else the machine runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "out" / "verifier.md"
DOCS = ("refunds.md", "orders.md", "account-and-security.md", "returns-and-exchanges.md")
PASSAGES = 5
SENTENCES = 4


def _paragraphs() -> list[str]:
    found = []
    for name in DOCS:
        text = (ROOT / "demo" / "helpcenter" / name).read_text(encoding="utf-8")
        found += [p.strip() for p in text.split("\n\n") if len(p) > 200 and not p.startswith("#")]
    return found


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{1000 * statistics.median(values):.1f} ms (p90 {1000 * p90:.1f} ms)"


def measure(rounds: int) -> dict[str, str]:
    """Time verifier construction (cold and warm) and checks per sentence over `rounds`."""
    from verification import PassageVerifier, split_sentences

    paragraphs = _paragraphs()
    PassageVerifier(["Load the model first."]).check_many(["Load the model first."])
    cold, warm, per_sentence, previous = [], [], [], None
    for r in range(rounds):
        start = r % max(1, len(paragraphs) - PASSAGES)
        passages = [f"{p} (Round {r}.)" for p in paragraphs[start : start + PASSAGES]]
        began = time.perf_counter()
        verifier = PassageVerifier(passages)
        cold.append(time.perf_counter() - began)
        if previous is not None:
            began = time.perf_counter()
            PassageVerifier(previous)
            warm.append(time.perf_counter() - began)
        previous = passages
        answer = [s.rstrip(".") + f", round {r}." for s in split_sentences(passages[0])]
        began = time.perf_counter()
        verifier.check_many(answer[:SENTENCES])
        per_sentence.append((time.perf_counter() - began) / len(answer[:SENTENCES]))
    return {
        "build, new passages": _ms(cold),
        "build, passages seen in the last round": _ms(warm) if warm else "-",
        f"check per sentence ({SENTENCES}-sentence batch)": _ms(per_sentence),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=16)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    figures = measure(args.rounds)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# Verifier cost on the chat path",
        "",
        f"{PASSAGES} passages, {SENTENCES}-sentence answers, {args.rounds} rounds; "
        f"load average {load} (1/5/15 min). `python -m bench.verifier`",
        "",
        "| | median (p90) |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in figures.items()),
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
