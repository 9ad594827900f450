"""Embedding throughput of one process under concurrent callers (issue 11 item 2).

    python -m bench.embeddings [--texts 240] [--callers 12]

`--callers` threads (as many as a daphne process runs turns) each embed one short question at
a time, as turn threads embed their queries, for each combination of:

- OMP_WAIT_POLICY: torch's OpenMP default (threads spin while they wait) or PASSIVE (what
  `supportbot.cpu_threads` sets before the model loads);
- coalescing (`EMBEDDINGS_COALESCE_MAX`): 0 = every caller runs the model on its own thread,
  256 = callers' texts share batched model calls on one encoder thread.

Also one caller feeding varied batch sizes (1-12 texts), the shape passage sentences have.
The policy is read once when torch loads, so each combination runs in a child process on the
torch runtime (`EMBEDDINGS_RUNTIME=torch`; ONNX Runtime's threads never spin unless asked, and
bench.embedding_runtimes compares the runtimes). Writes bench/out/embeddings_concurrency.md.
Figures depend on what else the machine runs: the report
records the load average next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


def child(texts: int, callers: int, coalesce: int) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from concurrent.futures import ThreadPoolExecutor

    from django.conf import settings

    from knowledge import embeddings

    settings.KNOWLEDGE_EMBEDDINGS_COALESCE_MAX = coalesce
    settings.KNOWLEDGE_EMBEDDINGS_RUNTIME = "torch"
    embeddings.embed_texts(["warm up the model"])
    questions = [
        f"customer question {i}: can I return a tent with a broken zipper?" for i in range(texts)
    ]
    latencies: list[float] = []

    def one(text: str) -> None:
        started = time.perf_counter()
        embeddings.embed_texts([text])
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(one, questions))
    wall = time.perf_counter() - started
    latencies.sort()
    rng = random.Random(1)
    sentences = [
        f"passage sentence {i} about refunds, shipping and warranty terms." for i in range(texts)
    ]
    started, at = time.perf_counter(), 0
    while at < len(sentences):
        size = rng.randint(1, 12)
        embeddings.embed_texts(sentences[at : at + size])
        at += size
    varied = time.perf_counter() - started
    return {
        "texts_per_s": texts / wall,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p95_ms": latencies[int(len(latencies) * 0.95)] * 1000,
        "varied_batches_s": varied,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=240)
    parser.add_argument("--callers", type=int, default=12)
    parser.add_argument("--child", nargs=2, metavar=("POLICY", "COALESCE"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.texts, args.callers, int(args.child[1]))))
        return
    rows = []
    for policy in ("default", "PASSIVE"):
        for coalesce in (0, 256):
            env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
            # "default": an empty value (libgomp's default policy) keeps
            # supportbot.cpu_threads from setting PASSIVE.
            env["OMP_WAIT_POLICY"] = "" if policy == "default" else "PASSIVE"
            load = os.getloadavg()[0]
            out = subprocess.run(  # noqa: S603 - our own module
                [
                    sys.executable,
                    "-m",
                    "bench.embeddings",
                    "--texts",
                    str(args.texts),
                    "--callers",
                    str(args.callers),
                    "--child",
                    policy,
                    str(coalesce),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                check=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"policy": policy, "coalesce": coalesce, "load": load, **result})
            print(rows[-1], flush=True)
    lines = [
        "# Embeddings under concurrent callers",
        "",
        f"`python -m bench.embeddings --texts {args.texts} --callers {args.callers}`: "
        f"{args.callers} threads each embedding one question at a time ({args.texts} in all), "
        "then one caller embedding the same number of sentences in batches of 1-12.",
        "",
        "| OMP_WAIT_POLICY | coalesce | load avg (1 min) | texts/s | p50 ms | p95 ms | "
        "varied batches s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {'unset (libgomp default)' if r['policy'] == 'default' else 'PASSIVE'} | "
            f"{r['coalesce']} | {r['load']:.1f} | {r['texts_per_s']:.0f} | {r['p50_ms']:.1f} | "
            f"{r['p95_ms']:.1f} | {r['varied_batches_s']:.2f} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embeddings_concurrency.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'embeddings_concurrency.md'}")


if __name__ == "__main__":
    main()
