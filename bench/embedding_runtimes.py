"""The local MiniLM encoder on torch (sentence-transformers) vs ONNX Runtime (issue 36 item 3).

    python -m bench.embedding_runtimes [--rounds 2] [--queries 200] [--passages 256] [--no-web]

Each measurement runs in a fresh child process, the two runtimes interleaved (torch, onnx,
onnx, torch, ...) so both see the same load from whatever else the machine runs:

- encoder: load time, single-query encode latency (p50/p95 over `--queries` development-set
  and demo questions, one at a time), batch throughput (help-center passages in batches of 32),
  resident memory (RSS) after loading and warming the encoder (and of the bare process
  before, Django set up);
- web: a daphne process (`config.asgi`, development settings, the embedded services of this
  checkout, no vLLM) from launch to `/readyz` 200 (the warm-up has loaded and run the model),
  and its RSS then.

Writes bench/out/embeddings.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
RUNTIMES = ("torch", "onnx")


def _questions(count: int) -> list[str]:
    questions = []
    for path in (
        ROOT / "demo" / "dev_faq" / "eval_answers.json",
        ROOT / "demo" / "helpcenter" / "eval_answers.json",
    ):
        for case in json.loads(path.read_text())["cases"]:
            questions.extend([case["q"]] if "q" in case else case.get("turns", []))
    questions = [q for q in questions if isinstance(q, str)]
    return [questions[i % len(questions)] for i in range(count)]


def _passages(count: int) -> list[str]:
    paragraphs = []
    for path in sorted((ROOT / "demo" / "helpcenter").glob("*.md")):
        paragraphs.extend(p.strip() for p in path.read_text().split("\n\n") if len(p.strip()) > 80)
    return [paragraphs[i % len(paragraphs)] for i in range(count)]


def child(runtime: str, queries: int, passages: int) -> dict:
    """One runtime's encoder in this (fresh) process."""
    import psutil

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings

    from knowledge import embeddings

    settings.KNOWLEDGE_EMBEDDINGS_RUNTIME = runtime
    me = psutil.Process()
    bare_mb = me.memory_info().rss / 2**20
    started = time.perf_counter()
    encoder = embeddings.local_model()
    encoder.sentence_vectors(["warm up the model"] * 4)
    encoder.token_vectors(["warm up the model"])
    load_s = time.perf_counter() - started
    latencies = []
    for text in _questions(queries):
        t0 = time.perf_counter()
        encoder.sentence_vectors([text])
        latencies.append(time.perf_counter() - t0)
    latencies.sort()
    batch = _passages(passages)
    t0 = time.perf_counter()
    for at in range(0, len(batch), 32):
        encoder.sentence_vectors(batch[at : at + 32])
    batch_s = time.perf_counter() - t0
    return {
        "runtime": runtime,
        "load_s": load_s,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p95_ms": latencies[int(len(latencies) * 0.95)] * 1000,
        "passages_per_s": len(batch) / batch_s,
        "bare_rss_mb": bare_mb,
        "rss_mb": me.memory_info().rss / 2**20,
        "torch_loaded": "torch" in sys.modules,
    }


def web(runtime: str, timeout: float = 180.0) -> dict:
    """Launch daphne with `runtime`; time to /readyz 200 and its RSS then."""
    import httpx
    import psutil

    from demo.orders.testing import free_port

    port = free_port()
    env = {
        **os.environ,
        "SUPPORTBOT_ENV": os.environ.get("SUPPORTBOT_ENV", "development"),
        "EMBEDDINGS_RUNTIME": runtime,
        "INFERENCE_AUTOSTART": "0",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    started = time.monotonic()
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"daphne ({runtime}) exited with {process.returncode}")
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                ready = False
            if ready:
                break
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"daphne ({runtime}) not ready in {timeout} s")
            time.sleep(0.1)
        ready_s = time.monotonic() - started
        for _ in range(20):  # a few requests after warm-up, as a load balancer's probes
            httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        rss_mb = psutil.Process(process.pid).memory_info().rss / 2**20
    finally:
        process.terminate()
        process.wait(20)
    return {"runtime": runtime, "ready_s": ready_s, "rss_mb": rss_mb}


def _run_child(runtime: str, args) -> dict:
    out = subprocess.run(  # noqa: S603 - our own module
        [
            sys.executable,
            "-m",
            "bench.embedding_runtimes",
            "--child",
            runtime,
            "--queries",
            str(args.queries),
            "--passages",
            str(args.passages),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _order(rounds: int) -> list[str]:
    """torch, onnx, onnx, torch, torch, onnx, ...: each runtime first as often as second."""
    order = []
    for r in range(rounds):
        order.extend(RUNTIMES if r % 2 == 0 else reversed(RUNTIMES))
    return order


def _median(rows: list[dict], runtime: str, key: str) -> float:
    return statistics.median(r[key] for r in rows if r["runtime"] == runtime)


def report(encoders: list[dict], webs: list[dict], args, load: tuple[float, float]) -> str:
    lines = [
        "# Embeddings: torch vs ONNX Runtime",
        "",
        f"`python -m bench.embedding_runtimes --rounds {args.rounds} --queries {args.queries} "
        f"--passages {args.passages}`{' --no-web' if args.no_web else ''}. Load average "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end on {os.cpu_count()} cores "
        "(more than that: other jobs shared the machine). Each measurement ran in a fresh "
        "process, torch and ONNX interleaved (torch, onnx, onnx, torch, ...), so the ratios are "
        "fair even where the absolute figures are not those of an idle machine. Medians of the "
        "rounds; every run below.",
        "",
        "| | torch (sentence-transformers) | ONNX Runtime | ONNX / torch |",
        "|---|---:|---:|---:|",
    ]
    rows = [
        ("encoder load + warm-up, s", "load_s", "{:.2f}"),
        (f"single query p50, ms ({args.queries} queries)", "p50_ms", "{:.1f}"),
        ("single query p95, ms", "p95_ms", "{:.1f}"),
        ("batch throughput, passages/s (batches of 32)", "passages_per_s", "{:.0f}"),
        ("RSS after load, warm-up and the runs above, MiB", "rss_mb", "{:.0f}"),
        ("RSS before loading (Django set up), MiB", "bare_rss_mb", "{:.0f}"),
    ]
    for label, key, fmt in rows:
        t, o = _median(encoders, "torch", key), _median(encoders, "onnx", key)
        lines.append(f"| {label} | {fmt.format(t)} | {fmt.format(o)} | {o / t:.2f} |")
    if webs:
        for label, key, fmt in (
            ("daphne: launch to /readyz 200, s", "ready_s", "{:.1f}"),
            ("daphne: RSS once ready, MiB", "rss_mb", "{:.0f}"),
        ):
            t, o = _median(webs, "torch", key), _median(webs, "onnx", key)
            lines.append(f"| {label} | {fmt.format(t)} | {fmt.format(o)} | {o / t:.2f} |")
    lines += ["", "Every run, in order:", "", "```"]
    lines += [
        json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()})
        for r in encoders + webs
    ]
    lines += ["```", ""]
    if args.note:
        lines += ["Notes:", "", *(f"- {note}" for note in args.note), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--no-web", action="store_true", help="skip the daphne measurements")
    parser.add_argument("--note", action="append", help="a line for the report's notes")
    parser.add_argument("--child", choices=RUNTIMES, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.queries, args.passages)))
        return
    os.environ.setdefault("SUPPORTBOT_ENV", "development")
    load_before = os.getloadavg()[0]
    encoders, webs = [], []
    for runtime in _order(args.rounds):
        encoders.append(_run_child(runtime, args))
        print(encoders[-1], flush=True)
    if not args.no_web:
        for runtime in _order(args.rounds):
            webs.append(web(runtime))
            print(webs[-1], flush=True)
    text = report(encoders, webs, args, (load_before, os.getloadavg()[0]))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embeddings.md").write_text(text)
    print(f"wrote {args.out / 'embeddings.md'}")


if __name__ == "__main__":
    main()
