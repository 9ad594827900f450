"""Threads of the embedding model in our own processes: how many, and whether they spin.

ONNX Runtime (the default embedding runtime) gets `cores_available()` intra-op threads and
spins only when the operator asked for it (`spinning_wanted`), for the reason below.

With the torch runtime, torch's OpenMP threads spin while they wait for each other. On a
machine whose cores are shared (daphne's turns, the vLLM worker, PostgreSQL), a spinning thread
holds a core its partner needs: measured on the 2-core machine under load, 400 texts in varied
batches took 74.6 s with the default policy and 2.4 s with PASSIVE (`python -m bench.embeddings`,
bench/out/embeddings_concurrency.md).
The policy is read once, when torch's OpenMP runtime loads, so `prefer_passive_wait` runs
before the model is imported. A value set by the operator is left alone.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

VARIABLE = "OMP_WAIT_POLICY"
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
_set_here = False


def prefer_passive_wait() -> None:
    """Set OMP_WAIT_POLICY=PASSIVE for this process unless the environment already sets it."""
    global _set_here
    if VARIABLE not in os.environ:
        os.environ[VARIABLE] = "PASSIVE"
        _set_here = True


def child_environment(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child that tunes its own threads (a vLLM engine): without our default."""
    if _set_here and env.get(VARIABLE) == "PASSIVE":
        env = {k: v for k, v in env.items() if k != VARIABLE}
    return env


def spinning_wanted() -> bool:
    """Whether the operator asked for spinning waits (OMP_WAIT_POLICY=ACTIVE)."""
    return os.environ.get(VARIABLE, "").strip().upper() == "ACTIVE"


def cores_available() -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota (a
    container limited to 2 CPUs on a 64-core node gets 2)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        quota, period = CGROUP_CPU_MAX.read_text().split()[:2]
    except (OSError, ValueError):
        return max(1, cores or 1)
    if quota != "max":
        cores = min(cores or 1, math.ceil(int(quota) / int(period)))
    return max(1, cores or 1)
