"""The inference gateway: the one entry point for model output.

`stream_chat` admits the request (hard caps, tenant token bucket and concurrency in Redis),
picks a worker (role tiers, load, affinity; waits at most the queue deadline while all are
saturated), streams from it and yields `ChatDelta`s, then one final `ChatResult`.

Failure contract:
- `InputTooLarge` (413): prompt or max_tokens over the hard caps.
- `TenantRateLimited` (429, `retry_after`): the tenant's budget or concurrency is used up.
- `PoolUnavailable` (503, `retry_after`): no healthy worker, all saturated past the queue
  deadline, every attempt failed before any text was yielded, or Redis (admission) is down.
- `UpstreamRejected`: the worker refused the request itself (4xx), not retried.
- `StreamBroken` (`partial_text`): the stream failed after text was yielded. A failure before
  the first text is retried on another worker (at most `max_attempts` attempts; a connection
  that closed before any response, as a reused idle one can, may go to the same worker once
  more); after it, never: the caller must fall back or hand off, never show a silently
  truncated answer. A `PoolUnavailable` after failed attempts names the last one's failure.
Metering: every attempt a worker took is one `InferenceUsage` row, however it ends — `ok`,
`stream_broken`, `error` (failed after the worker answered 200, before any text) or
`cancelled` (the caller broke out, called `aclose()`, was cancelled or timed out) — with the
prompt tokens processed and the completion tokens received before the stop (`estimated` when
the engine did not report them). Rows are written in the background (`Pool.spawn`;
`Pool.flush()` waits for pending writes). The tenant's token bucket is settled with the sum of
those tokens: an attempt no worker took costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from inference.errors import (
    InferenceError,
    InputTooLarge,
    PoolUnavailable,
    StreamBroken,
    TenantRateLimited,
    UpstreamRejected,
)
from inference.gateway.availability import gateway_available
from inference.gateway.call import ChatRequest, admit
from inference.gateway.results import ChatDelta, ChatResult

__all__ = [
    "ChatDelta",
    "ChatResult",
    "InferenceError",
    "InputTooLarge",
    "PoolUnavailable",
    "StreamBroken",
    "TenantRateLimited",
    "UpstreamRejected",
    "complete",
    "gateway_available",
    "stream_chat",
]


async def stream_chat(
    *,
    tenant_id: int,
    messages: list[dict],
    max_tokens: int = 256,
    role: str = "primary",
    affinity_key: str | None = None,
    temperature: float = 0.2,
    response_format: dict | None = None,
    timeout_s: float | None = None,
) -> AsyncIterator[ChatDelta | ChatResult]:
    """Stream a chat completion; see the module docstring for the contract.

    `affinity_key` (e.g. the conversation id) keeps one conversation on one worker while that
    worker is not overloaded, so its prompt prefix stays in that worker's cache; without one,
    requests sharing a system prompt prefer one worker the same way. `timeout_s`
    bounds the whole request (default: first-byte plus idle timeouts apply per worker).
    """
    call = await admit(
        ChatRequest(
            tenant_id=tenant_id,
            messages=messages,
            max_tokens=max_tokens,
            role=role,
            affinity_key=affinity_key,
            temperature=temperature,
            response_format=response_format,
            timeout_s=timeout_s,
        )
    )
    try:
        while True:
            ws = await call.pick_worker()
            async with call.attempt(ws) as attempt:
                while (event := await call.next_event(attempt)) is not None:
                    if event.content:
                        yield ChatDelta(event.content)
            if attempt.retry:
                continue
            result = call.record_success(attempt)
            await call.settle()
            yield result
            return
    except (GeneratorExit, asyncio.CancelledError):
        call.outcome = "cancelled"
        raise
    finally:
        await call.settle()


async def complete(
    *,
    tenant_id: int,
    messages: list[dict],
    max_tokens: int = 256,
    role: str = "small",
    affinity_key: str | None = None,
    response_format: dict | None = None,
    temperature: float = 0.0,
    timeout_s: float | None = None,
) -> ChatResult:
    """Run `stream_chat` to the end and return its ChatResult (same errors)."""
    stream = stream_chat(
        tenant_id=tenant_id,
        messages=messages,
        max_tokens=max_tokens,
        role=role,
        affinity_key=affinity_key,
        temperature=temperature,
        response_format=response_format,
        timeout_s=timeout_s,
    )
    async with contextlib.aclosing(stream):
        async for item in stream:
            if isinstance(item, ChatResult):
                return item
    raise InferenceError("the stream ended without a final result")  # not reachable by contract
