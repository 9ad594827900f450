"""No event lost under connect/close churn: steady chats answered while other sessions come and go.

    .venv/bin/python -m bench.churn [--turns 10000] [--steady 16] [--churners 12]
                                    [--turn-timeout 30] [--cap 1500] [--cold]

Starts its own stack (`bench.harness`, like `bench.chat_load`; no model worker: the answers take
the extractive path). Every socket of a daphne process receives through one Redis channel and
one pump (supportbot/channel_layer.py); a socket that closes cancels its consumer while the
others wait on that channel. Before the pump, a consumer cancelled mid-pop lost a message
popped for another socket: about 1 turn in 1,500 never got its `answer.completed`.

- steady chats (`--steady`): each keeps one socket open and asks help-center questions one
  after another. A turn is lost when `answer.completed` does not arrive within
  `--turn-timeout` s on a socket that stayed open; the chat then starts a new session.
- churners (`--churners`): each loops: open a socket, `session.start`, then either close at
  once, or send a question and close on its first event (mid-answer), or after the answer.

The run ends after `--turns` steady turns (or `--cap` s). The answer cache is on unless
`--cold` (the events take the same channel-layer path either way; the cache makes turns cheap,
so more of them fit the run). Loopback only. Writes bench/out/churn.md and churn.json.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from bench import harness
from bench.chat_load import QUESTIONS, TENANT, SessionRefused, Turn, _ask, wait_for_event

LIMITS_OFF = {
    # One loopback address and a few conversations ask thousands of questions: the abuse
    # limits would refuse most of them (that is their job, measured elsewhere).
    "RATE_LIMIT_MESSAGE_CONVERSATION": "1000000/60",
    "RATE_LIMIT_MESSAGE_CUSTOMER": "1000000/60",
    "RATE_LIMIT_MESSAGE_IP": "1000000/60",
    "RATE_LIMIT_SESSION_ANONYMOUS": "1000000/60",
}
CHURN_KINDS = ("close_at_once", "close_mid_answer", "close_after_answer")


@dataclass
class Tally:
    target: int
    turns: list[Turn] = field(default_factory=list)
    lost: list[dict] = field(default_factory=list)  # steady turns without answer.completed
    errors: collections.Counter = field(default_factory=collections.Counter)
    churn: collections.Counter = field(default_factory=collections.Counter)
    churn_errors: collections.Counter = field(default_factory=collections.Counter)
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None

    @property
    def done(self) -> int:
        return sum(1 for t in self.turns if t.full_s is not None)

    def summary(self) -> dict:
        first = [t.first_s for t in self.turns if t.first_s is not None and t.full_s is not None]
        full = [t.full_s for t in self.turns if t.full_s is not None]
        wall = (self.ended or time.perf_counter()) - self.started
        return {
            "turns_answered": self.done,
            "turns_lost": len(self.lost),
            "lost": self.lost[:50],
            "turn_errors": dict(self.errors),
            "churn_sessions": dict(self.churn),
            "churn_sessions_total": sum(self.churn.values()),
            "churn_errors": dict(self.churn_errors),
            "first_p50": harness.pct(first, 0.5),
            "first_p95": harness.pct(first, 0.95),
            "full_p95": harness.pct(full, 0.95),
            "turns_per_s": self.done / wall if wall else 0.0,
            "wall_s": wall,
        }


def _stop(tally: Tally, deadline: float) -> bool:
    return tally.done + len(tally.lost) >= tally.target or time.perf_counter() >= deadline


async def steady_chat(i: int, url: str, origin: str, tally: Tally, *, turn_s, deadline) -> None:
    """One customer who stays: a socket asking question after question until the run ends."""
    asked = 0
    while not _stop(tally, deadline):
        try:
            async with connect(
                url, origin=origin, open_timeout=turn_s, ping_interval=None, close_timeout=2
            ) as ws:
                await ws.send(json.dumps({"type": "session.start", "tenant": TENANT}))
                await wait_for_event(ws, "session.ready", turn_s)
                while not _stop(tally, deadline):
                    question = QUESTIONS[(i * 7 + asked) % len(QUESTIONS)]
                    asked += 1
                    turn = Turn(i, question, time.perf_counter() - tally.started)
                    await _ask(ws, turn, question, turn_s)
                    tally.turns.append(turn)
                    if turn.error == "timeout":
                        # the socket is open and the answer never completed: lost
                        at = round(turn.started, 1)
                        tally.lost.append({"chat": i, "question": question, "at_s": at})
                        break  # a new session: the old one's state is unknown
                    if turn.error:
                        tally.errors[turn.error] += 1
                        break
        except (TimeoutError, ConnectionClosed, InvalidHandshake, OSError) as exc:
            tally.errors[f"session: {type(exc).__name__}"] += 1
        except SessionRefused as exc:
            tally.errors[f"session refused: {exc}"] += 1
            await asyncio.sleep(1)


async def churner(i: int, url: str, origin: str, tally: Tally, *, turn_s, deadline) -> None:
    """Sessions that come and go: their consumers are cancelled while others wait."""
    rng = random.Random(i)
    while not _stop(tally, deadline):
        kind = rng.choice(CHURN_KINDS)
        try:
            async with connect(
                url, origin=origin, open_timeout=turn_s, ping_interval=None, close_timeout=1
            ) as ws:
                await ws.send(json.dumps({"type": "session.start", "tenant": TENANT}))
                await wait_for_event(ws, "session.ready", turn_s)
                if kind != "close_at_once":
                    question = rng.choice(QUESTIONS)
                    await ws.send(
                        json.dumps(
                            {
                                "type": "message.send",
                                "client_message_id": uuid.uuid4().hex,
                                "text": question,
                            }
                        )
                    )
                    wanted = "answer.completed" if kind == "close_after_answer" else None
                    async with asyncio.timeout(turn_s):
                        while True:
                            event = json.loads(await ws.recv())
                            if wanted is None or event.get("type") in (wanted, "error"):
                                break
            tally.churn[kind] += 1
        except (TimeoutError, ConnectionClosed, InvalidHandshake, OSError, SessionRefused) as exc:
            tally.churn_errors[f"{kind}: {type(exc).__name__}"] += 1
            await asyncio.sleep(0.5)


async def run(args, stack) -> Tally:
    url = stack.url.replace("http://", "ws://") + "/ws/chat/"
    origin = stack.url
    tally = Tally(args.turns)
    deadline = time.perf_counter() + args.cap
    common = {"turn_s": args.turn_timeout, "deadline": deadline}

    async def progress() -> None:
        while not _stop(tally, deadline):
            await asyncio.sleep(30)
            s = tally.summary()
            print(
                f"{s['wall_s']:>6.0f}s: {s['turns_answered']} answered, {s['turns_lost']} lost, "
                f"{s['churn_sessions_total']} churn sessions, {s['turns_per_s']:.1f} turns/s",
                flush=True,
            )

    reporter = asyncio.create_task(progress())
    await asyncio.gather(
        *(steady_chat(i, url, origin, tally, **common) for i in range(args.steady)),
        *(churner(i, url, origin, tally, **common) for i in range(args.churners)),
    )
    tally.ended = time.perf_counter()
    reporter.cancel()
    return tally


def report(summary: dict, meta: dict) -> str:
    s = summary
    goal = "met" if s["turns_lost"] == 0 and s["turns_answered"] >= meta["turns"] else "NOT met"
    lines = [
        "# No event lost under connect/close churn",
        "",
        meta["machine_note"],
        f"{meta['steady']} steady chats asked help-center questions one after another while "
        f"{meta['churners']} churners opened sessions and closed them (at once, mid-answer, or "
        f"after the answer), all on one daphne process (`make run`'s layout, no model worker; "
        f"answer cache {'off' if meta['cold'] else 'on'}). A turn is lost when its "
        f"`answer.completed` does not arrive within {meta['turn_timeout']:.0f} s on a socket "
        "that stayed open.",
        "",
        f"- steady turns answered: **{s['turns_answered']}**, lost: **{s['turns_lost']}** "
        f"(goal: 0 lost in {meta['turns']}: {goal})",
        f"- other turn errors: {s['turn_errors'] or 'none'}",
        f"- churn sessions: {s['churn_sessions_total']} ({s['churn_sessions']}); "
        f"churn errors: {s['churn_errors'] or 'none'}",
        f"- first words p50 {s['first_p50']:.3f} s, p95 {s['first_p95']:.3f} s; full answer p95 "
        f"{s['full_p95']:.3f} s; {s['turns_per_s']:.1f} steady turns/s over {s['wall_s']:.0f} s",
        "",
        f"Command: `.venv/bin/python -m bench.churn {meta['argv']}`. Raw numbers: churn.json. "
        f"Run took {meta['run_s']:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000, help="steady turns to run")
    parser.add_argument("--steady", type=int, default=16, help="chats that stay open")
    parser.add_argument("--churners", type=int, default=12, help="sessions coming and going")
    parser.add_argument("--turn-timeout", type=float, default=30.0)
    parser.add_argument("--cap", type=float, default=1500.0, help="end the run after (s)")
    parser.add_argument("--cold", action="store_true", help="answer cache off")
    parser.add_argument("--out", type=Path, default=harness.OUT)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    harness.raise_nofile()
    env = dict(LIMITS_OFF)
    if args.cold:
        env["ANSWER_CACHE_ENABLED"] = "0"
    began = time.monotonic()
    print("starting the stack (own ports and database) …", flush=True)
    stack = harness.start_stack(env)
    try:
        tally = asyncio.run(run(args, stack))
    finally:
        harness.stop_stack(stack, None)
    summary = tally.summary()
    meta = {
        "machine_note": harness.machine_note(),
        "turns": args.turns,
        "steady": args.steady,
        "churners": args.churners,
        "turn_timeout": args.turn_timeout,
        "cold": args.cold,
        "argv": " ".join(argv),
        "run_s": time.monotonic() - began,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    text = report(summary, meta)
    (args.out / "churn.md").write_text(text)
    (args.out / "churn.json").write_text(json.dumps({"meta": meta, **summary}, indent=1))
    print(text)
    return {"meta": meta, **summary}


if __name__ == "__main__":
    main()
