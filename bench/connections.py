"""Idle chat sockets one daphne process holds, and the memory each costs.

    .venv/bin/python -m bench.connections [--target 5000] [--batch 250] [--cap 600]

Starts its own stack (`bench.harness`, like `bench.chat_load`), then opens chat sockets on
`/ws/chat/` in batches (all of a batch at once), each with `session.start` for `acme` answered
by `session.ready` (so every socket is a real customer with a conversation and a channel-layer
group), until `--target` sockets are open, a batch has a failure, or `--cap` seconds pass.
The sockets then stay idle for `--idle` seconds; each is sent a `ping` and must answer `pong`.
Memory per connection = (daphne RSS with the sockets open, after the idle period − RSS after a
warm-up with none) / sockets held. Loopback only. Writes bench/out/connections.md and
connections.json.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import time
from pathlib import Path

import psutil
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench import harness
from bench.chat_load import TENANT, SessionRefused, wait_for_event

GOAL = 5000


async def open_chat(url: str, origin: str, timeout: float) -> ClientConnection:
    ws = await connect(
        url, origin=origin, open_timeout=timeout, ping_interval=None, close_timeout=2
    )
    try:
        await ws.send(json.dumps({"type": "session.start", "tenant": TENANT}))
        await wait_for_event(ws, "session.ready", timeout)
    except BaseException:
        await ws.close()
        raise
    return ws


async def ping(ws: ClientConnection, timeout: float) -> bool:
    try:
        await ws.send(json.dumps({"type": "ping"}))
        await wait_for_event(ws, "pong", timeout)
    except (TimeoutError, ConnectionClosed, SessionRefused):
        return False
    return True


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:80] if str(exc) else ""
    return f"{type(exc).__name__}{': ' + text if text else ''}"


async def measure(args, stack) -> dict:
    url = stack.url.replace("http://", "ws://") + "/ws/chat/"
    origin = stack.url
    daphne = harness.daphne_process(stack)
    client = psutil.Process()
    # Warm-up: the first sessions load code paths and fill pools that later ones reuse.
    warm = [await open_chat(url, origin, args.open_timeout) for _ in range(5)]
    await asyncio.gather(*(ws.close() for ws in warm))
    await asyncio.sleep(3)
    base = {"rss": harness.rss_bytes(daphne), "fds": daphne.num_fds()}
    held: list[ClientConnection] = []
    series = []
    stop = f"target {args.target} reached"
    failures: collections.Counter = collections.Counter()
    began = time.monotonic()
    while len(held) < args.target:
        if time.monotonic() - began > args.cap:
            stop = f"time cap of {args.cap:.0f} s reached"
            break
        k = min(args.batch, args.target - len(held))
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(open_chat(url, origin, args.open_timeout) for _ in range(k)), return_exceptions=True
        )
        took = time.perf_counter() - t0
        opened = [r for r in results if isinstance(r, ClientConnection)]
        failed = [r for r in results if not isinstance(r, ClientConnection)]
        held += opened
        failures.update(_reason(r) for r in failed)
        series.append(
            {
                "held": len(held),
                "failed": len(failed),
                "batch_s": took,
                "daphne_rss": harness.rss_bytes(daphne),
                "daphne_fds": daphne.num_fds(),
                "daphne_cpu_pct": daphne.cpu_percent(),
                "loadavg_1m": os.getloadavg()[0],
            }
        )
        print(f"  {len(held):>5} open ({len(failed)} failed, batch {took:.1f}s)", flush=True)
        if failed:
            stop = f"{len(failed)} of a batch of {k} failed after {len(held) - len(opened)} open"
            break
    await asyncio.sleep(args.idle)
    after = {"rss": harness.rss_bytes(daphne), "fds": daphne.num_fds()}
    still_open = sum(1 for ws in held if ws.state.name == "OPEN")
    t0 = time.perf_counter()
    pongs = await asyncio.gather(*(ping(ws, args.ping_timeout) for ws in held))
    ping_s = time.perf_counter() - t0
    result = {
        "held": len(held),
        "stop": stop,
        "failures": dict(failures),
        "baseline": base,
        "after": after,
        "per_connection_bytes": (after["rss"] - base["rss"]) / len(held) if held else None,
        "still_open_after_idle": still_open,
        "pongs": sum(pongs),
        "ping_all_s": ping_s,
        "client_rss": client.memory_info().rss,
        "daphne_nofile": daphne.rlimit(psutil.RLIMIT_NOFILE)[0],
        "client_nofile": client.rlimit(psutil.RLIMIT_NOFILE)[0],
        "series": series,
    }
    for i in range(0, len(held), 500):
        await asyncio.gather(*(ws.close() for ws in held[i : i + 500]), return_exceptions=True)
    return result


def report(r: dict, meta: dict) -> str:
    per = r["per_connection_bytes"]
    ok = r["held"] >= GOAL and r["pongs"] == r["held"]
    lines = [
        "# Idle chat connections on one daphne process",
        "",
        f"Machine: {meta['machine_note']}. Shared with other work unless stated otherwise.",
        f"Each socket: `/ws/chat/` + `session.start` for `{TENANT}` answered by "
        f"`session.ready` (a visitor, a conversation, a channel-layer group); batches of "
        f"{meta['batch']} opened at once; idle {meta['idle']:.0f} s before the checks. "
        f"Open-file limits: daphne {r['daphne_nofile']}, client {r['client_nofile']}.",
        "",
        f"- held: **{r['held']}** sockets (target {meta['target']}; stopped: {r['stop']})"
        + (
            f"; failures: {', '.join(f'{k} ×{v}' for k, v in r['failures'].items())}"
            if r["failures"]
            else ""
        ),
        f"- goal ≥ {GOAL} sockets, all answering: {'met' if ok else 'NOT met'}"
        + (f" (this run's target was {meta['target']})" if meta["target"] < GOAL else ""),
        f"- daphne RSS: {r['baseline']['rss'] / 2**20:.1f} MiB after warm-up → "
        f"{r['after']['rss'] / 2**20:.1f} MiB with {r['held']} open: "
        + (f"**{per / 1024:.1f} KiB per connection**" if per is not None else "–"),
        f"- daphne open files: {r['baseline']['fds']} → {r['after']['fds']}",
        f"- after the idle period: {r['still_open_after_idle']} still open; "
        f"{r['pongs']} of {r['held']} answered `ping` with `pong` "
        f"(all pinged at once, {r['ping_all_s']:.1f} s for all)",
        f"- the client process: {r['client_rss'] / 2**20:.0f} MiB RSS",
        "",
        "| open | failed in batch | batch s | daphne RSS MiB | daphne fds | load 1m |",
        "|---|---|---|---|---|---|",
    ]
    for s in r["series"]:
        lines.append(
            f"| {s['held']} | {s['failed']} | {s['batch_s']:.1f} | {s['daphne_rss'] / 2**20:.1f} "
            f"| {s['daphne_fds']} | {s['loadavg_1m']:.1f} |"
        )
    lines += ["", f"Raw numbers: connections.json. Run took {meta['run_s']:.0f} s.", ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=int, default=GOAL)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--cap", type=float, default=600.0, help="stop ramping after (s)")
    parser.add_argument("--idle", type=float, default=10.0, help="idle seconds before checks")
    parser.add_argument("--open-timeout", type=float, default=30.0)
    parser.add_argument("--ping-timeout", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=harness.OUT)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    nofile = harness.raise_nofile()
    if nofile < args.target + 256:
        sys.exit(f"open-file limit {nofile} is too low for {args.target} sockets")
    began = time.monotonic()
    print("starting the stack (own ports and database) …", flush=True)
    # Thousands of sockets from one address: lift the per-address cap for this measurement.
    stack = harness.start_stack({"CHAT_SOCKETS_PER_IP": "0"})
    try:
        result = asyncio.run(measure(args, stack))
    finally:
        harness.stop_stack(stack, None)
    meta = {
        "machine": harness.machine_info(),
        "machine_note": harness.machine_note(),
        "target": args.target,
        "batch": args.batch,
        "idle": args.idle,
        "run_s": time.monotonic() - began,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    text = report(result, meta)
    (args.out / "connections.md").write_text(text)
    (args.out / "connections.json").write_text(json.dumps({"meta": meta, **result}, indent=1))
    print(text)
    print(f"wrote {args.out / 'connections.md'}, connections.json")
    return {"meta": meta, **result}


if __name__ == "__main__":
    main()
