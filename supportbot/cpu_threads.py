"""OpenMP's wait policy for the embedding model in our own processes.

Torch's OpenMP threads spin while they wait for each other. On a machine whose cores are
shared (daphne's turns, the vLLM worker, PostgreSQL), a spinning thread holds a core its
partner needs: measured on the 2-core machine under load, 400 texts in varied batches took
74.6 s with the default policy and 2.4 s with PASSIVE (`python -m bench.embeddings`,
bench/out/embeddings.md).
The policy is read once, when torch's OpenMP runtime loads, so `prefer_passive_wait` runs
before the model is imported. A value set by the operator is left alone.
"""

from __future__ import annotations

import os

VARIABLE = "OMP_WAIT_POLICY"
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
