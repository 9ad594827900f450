"""Warm a web process up before its first customer: load the local embedding model and run
it once (sentence and word-piece vectors), in a background thread started with the ASGI app.

Measured on the 2-core machine: the first answer after a fresh start took 4.0 s (model load,
torch's first pass) and the next ones 0.1 s. `/readyz` reports `embeddings: warming` (503)
until the warm-up is done, so a load balancer, Kubernetes or `supportbot.tests.stack` sends
traffic only to a warm process. A failed warm-up is logged and reported (`failed: …`, 503):
the process could not answer anyway.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

logger = logging.getLogger(__name__)

NOT_STARTED = "not started"
WARMING = "warming"
OK = "ok"

_state = NOT_STARTED
_lock = threading.Lock()


def state() -> str:
    """`not started` (this process never warms up: a command, a test), `warming`, `ok` or
    `failed: <reason>`."""
    return _state


def readiness() -> str | None:
    """The `embeddings` check of `/readyz`: None in a process that never warms up."""
    current = state()
    return None if current == NOT_STARTED else current


def start() -> bool:
    """Start the warm-up once per process (no-op when the setting is off or it already ran);
    return whether this call started it."""
    global _state
    if not settings.KNOWLEDGE_EMBEDDINGS_WARMUP:
        return False
    with _lock:
        if _state != NOT_STARTED:
            return False
        _state = WARMING
    threading.Thread(target=_run, name="warmup", daemon=True).start()
    return True


def _run() -> None:
    global _state
    from knowledge import embeddings

    started = time.monotonic()
    try:
        embeddings.embed_texts(["How long does shipping take?"])
        if embeddings.token_embeddings_available():
            embeddings.embed_tokens(["How long does shipping take?"])
    except Exception as exc:  # noqa: BLE001 - reported through /readyz and the log
        _state = f"failed: {exc.__class__.__name__}: {exc}"[:300]
        logger.exception("warm-up failed")
        return
    _state = OK
    logger.info("warm-up done in %.1f s", time.monotonic() - started)
