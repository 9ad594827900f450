"""Where a turn's CPU goes: the web process sampled by py-spy under a steady chat load.

    .venv/bin/python -m bench.profile_turn [--chats 32] [--seconds 30] [--rate 100]
                                           [--out bench/out]

Starts its own stack (`bench.harness`, as `bench.chat_load` does: fresh database, tenant `acme`,
the indexed help center, answer cache off, no model worker: the answers take the extractive
path; every question worded once, so the question is embedded every turn), warms it up, then
keeps `--chats` chats asking questions one after another while `py-spy record` samples the
daphne process for `--seconds`. Two recordings run side by side: collapsed stacks
(`profile_turn.txt`) and a flame graph (`profile_turn.svg`). py-spy's own idle detection is
unreliable here (idle pool threads and waits on sockets show up as active), so a sample whose
innermost frame is a known wait (`WAITS`: a pool thread waiting for work, psycopg waiting for
the server, a blocking Redis read, a lock or selector wait) counts as waiting, not as CPU.

Each sample is given to one part of the turn: the first rule of `PARTS` that any of its frames
matches, so a database call made by the search counts as search and a sealed value written to
the database as encryption. CPU ms per turn = the share of samples × the process's CPU seconds
in the window (psutil) ÷ the turns answered in the window. Writes `profile_turn.md`.
Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import harness
from bench.chat_load import METRICS_TOKEN, questions_for, ws_level
from bench.churn import LIMITS_OFF

# (part, frame pattern): the first part any frame of a sample matches takes the sample.
PARTS: list[tuple[str, re.Pattern]] = [
    (
        "embedding the question",
        re.compile(r"knowledge/(embeddings|minilm)\.py|onnxruntime|tokenizers|torch/|transformers"),
    ),
    ("search SQL", re.compile(r"knowledge/selectors/")),
    ("verification", re.compile(r"verification/")),
    (
        "composition",
        re.compile(r"chat/orchestrator/(extractive|knowledge_answer|weak|followup)\.py"),
    ),
    ("encryption", re.compile(r"supportbot/encryption\.py|cryptography/|supportbot/fields\.py")),
    (
        "identity and limits",
        re.compile(
            r"chat/(identity|limits|chat_sessions)\.py|supportbot/(ratelimit|client_address|"
            r"input_guard)\.py"
        ),
    ),
    ("database round trips", re.compile(r"psycopg|django/db/")),
    ("metrics and logging", re.compile(r"prometheus_client/|/logging/|supportbot/observability")),
    (
        "WebSocket and channel layer",
        re.compile(
            r"daphne/|twisted/|autobahn/|channels/|channels_redis/|supportbot/channel_layer|"
            r"redis/|msgpack|chat/(consumers|sockets)\.py|conversations/events/"
        ),
    ),
    ("turn orchestration (other)", re.compile(r"chat/orchestrator/|conversations/")),
    ("event loop and threads (other)", re.compile(r"asyncio/|asgiref/|threading\.py")),
]
OTHER = "other"
WAITING = "waiting (not CPU)"
# Innermost frames that wait rather than work.
WAITS = re.compile(
    r"^(_worker \(concurrent/futures/thread\.py|wait \(psycopg/|_read_from_socket \(redis/|"
    r"(wait|_wait_for_tstate_lock|acquire) \(threading\.py|select \(selectors\.py|"
    r"get \(queue\.py|_run \(knowledge/embeddings\.py)"  # the last: the encode batcher's idle get
)
# Every question asked once (as customers do): the process's cache of question vectors would
# otherwise answer the help-center list's repeats without embedding them.
OPENERS = ("", "Hi, ", "Hello! ", "Quick question: ", "Hey there, ", "Good morning. ", "Sorry, ")
CLOSERS = ("", " Thanks!", " Thank you.", " Please help.", " Cheers", " Many thanks.", " Ta")


@dataclass
class Profile:
    samples: collections.Counter  # part -> samples (working ones), WAITING -> waiting ones
    leaves: collections.Counter  # innermost frame of working samples -> samples
    total: int  # working samples


def part_of(frames: list[str]) -> str:
    """The part of the turn a sample's stack belongs to (the first rule any frame matches)."""
    for name, pattern in PARTS:
        if any(pattern.search(frame) for frame in frames):
            return name
    return OTHER


def unique_questions(chat: int, count: int) -> list[str]:
    """Chat `chat`'s questions, each worded differently from every other chat's."""
    out = []
    for k, question in enumerate(questions_for(chat, count)):
        n = chat * count + k
        opener = OPENERS[n % len(OPENERS)]
        closer = CLOSERS[(n // len(OPENERS)) % len(CLOSERS)]
        asked = question[0].lower() + question[1:] if opener else question
        out.append(f"{opener}{asked}{closer} (ticket {n})")
    return out


def parse_collapsed(text: str) -> Profile:
    """py-spy's raw output: `frame;frame;… count` per line, outermost frame first."""
    samples: collections.Counter = collections.Counter()
    leaves: collections.Counter = collections.Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        n = int(count)
        if WAITS.match(frames[-1]):
            samples[WAITING] += n
            continue
        samples[part_of(frames)] += n
        leaves[frames[-1]] += n
        total += n
    return Profile(samples, leaves, total)


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        sys.exit("py-spy is not installed: `make setup` installs the dev dependencies")
    return found


def _record(pid: int, seconds: float, rate: int, fmt: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen(  # noqa: S603 - the venv's py-spy on our own daphne's pid
        [
            _py_spy(),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            str(rate),
            "--format",
            fmt,
            "--output",
            str(out),
            "--nonblocking",  # never pause the web process to read it
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def measure(args, stack) -> dict:
    ws_url = stack.url.replace("http://", "ws://") + "/ws/chat/"
    daphne = harness.daphne_process(stack)
    warm = {"n": 2, "per_chat": 2, "cap_s": 60, "turn_s": 60}
    w = await ws_level(target="product", ws_url=ws_url, origin=stack.url, **warm)
    if w.errors or any(t.error for t in w.turns):
        raise RuntimeError(f"warm-up failed: {w.summary()}")
    # The load runs past the recording on both sides: a few seconds to reach steady state
    # first, and the recordings end before the chats stop asking.
    lead = 5.0
    load_t0 = time.perf_counter()  # ws_level's own start, to within the task's first step
    load = asyncio.create_task(
        ws_level(
            target="product",
            ws_url=ws_url,
            origin=stack.url,
            n=args.chats,
            per_chat=200,
            cap_s=lead + args.seconds + 5,
            turn_s=60,
            questions_of=unique_questions,
        )
    )
    await asyncio.sleep(lead)
    started = time.perf_counter()
    cpu0 = daphne.cpu_times()
    recorders = [
        _record(daphne.pid, args.seconds, args.rate, "raw", args.out / "profile_turn.txt"),
        _record(daphne.pid, args.seconds, args.rate, "flamegraph", args.out / "profile_turn.svg"),
    ]
    await asyncio.to_thread(lambda: [r.wait() for r in recorders])
    cpu1 = daphne.cpu_times()
    ended = time.perf_counter()
    run = await load
    for r in recorders:
        if r.returncode:
            raise RuntimeError(f"py-spy failed: {r.stderr.read()}")
    window = [
        t
        for t in run.turns
        if t.error is None
        and t.full_s is not None
        and started <= load_t0 + t.started + t.full_s <= ended
    ]
    return {
        "cpu_s": (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system),
        "wall_s": ended - started,
        "turns": len(window),
        "errors": len([t for t in run.turns if t.error]) + len(run.errors),
        "first_p95": harness.pct([t.first_s for t in window if t.first_s is not None], 0.95),
        "rss_mib": harness.rss_bytes(daphne) / 2**20,
    }


def report(profile: Profile, figures: dict, meta: dict) -> str:
    per_turn = 1000 * figures["cpu_s"] / figures["turns"] if figures["turns"] else float("nan")
    lines = [
        "# Where a turn's CPU goes (bench/profile_turn.py)",
        "",
        f"`{meta['command']}` — {meta['machine_note']}",
        "",
        f"- {meta['chats']} chats asking help-center questions one after another (answer cache "
        "off, no model worker: extractive answers), daphne sampled by py-spy at "
        f"{meta['rate']} Hz for {figures['wall_s']:.0f} s: {profile.total} working samples "
        f"({profile.samples.get(WAITING, 0)} more were waits, not counted).",
        f"- In the window: {figures['turns']} turns answered "
        f"({figures['turns'] / figures['wall_s']:.1f}/s), {figures['errors']} errors, "
        f"first words p95 {figures['first_p95']:.2f} s; daphne used "
        f"{figures['cpu_s']:.1f} CPU s ({100 * figures['cpu_s'] / figures['wall_s']:.0f}% of a "
        f"core): **{per_turn:.0f} CPU ms per turn**; resident {figures['rss_mib']:.0f} MiB.",
        f"- Load average when it ended: {meta['loadavg']:.1f} (2 cores).",
        "",
        "| part of the turn | samples | share | CPU ms per turn |",
        "|---|---:|---:|---:|",
    ]
    order = [name for name, _ in PARTS] + [OTHER]
    for name in order:
        n = profile.samples.get(name, 0)
        share = n / profile.total if profile.total else 0.0
        lines.append(f"| {name} | {n} | {100 * share:.1f}% | {share * per_turn:.1f} |")
    lines += [
        "",
        "Shares are of the working samples. "
        "A sample belongs to the first part (in this order) that any frame of its stack "
        "matches (`PARTS`): a query run by the search is search, a sealed value written to the "
        "database is encryption, the rest of the database time is round trips.",
        "",
        "## Innermost frames (self time), top 25",
        "",
        "| frame | samples | share |",
        "|---|---:|---:|",
    ]
    for frame, n in profile.leaves.most_common(25):
        lines.append(f"| `{frame.replace('|', '/')}` | {n} | {100 * n / profile.total:.1f}% |")
    lines += ["", "Flame graph: `profile_turn.svg`; collapsed stacks: `profile_turn.txt`.", ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=100, help="samples per second")
    parser.add_argument("--out", type=Path, default=harness.OUT)
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite profile_turn.md from the last run's profile_turn.txt and .json",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "profile_turn.json"
    if args.report_only:
        run = json.loads(saved.read_text())
    else:
        run = {"figures": _run(args), "meta": _meta(args, argv)}
        saved.write_text(json.dumps(run, indent=1))
    # --nonblocking reads the process while it runs: now and then a frame's name is torn bytes.
    stacks = (args.out / "profile_turn.txt").read_text(encoding="utf-8", errors="replace")
    profile = parse_collapsed(stacks)
    text = report(profile, run["figures"], run["meta"])
    (args.out / "profile_turn.md").write_text(text)
    print(text)


def _run(args) -> dict:
    harness.raise_nofile()
    env = {
        "ASGI_APPLICATION_PATH": "bench.asgi:application",
        "METRICS_TOKEN": METRICS_TOKEN,
        "ANSWER_CACHE_ENABLED": "0",
        **LIMITS_OFF,
    }
    print("starting the stack (own ports and database) …", flush=True)
    stack = harness.start_stack(env)
    try:
        return asyncio.run(measure(args, stack))
    finally:
        harness.stop_stack(stack, None)


def _meta(args, argv: list[str] | None) -> dict:
    return {
        "command": "python -m bench.profile_turn " + " ".join(argv or sys.argv[1:]),
        "machine_note": harness.machine_note(),
        "chats": args.chats,
        "rate": args.rate,
        "loadavg": os.getloadavg()[0],
    }


if __name__ == "__main__":
    main()
