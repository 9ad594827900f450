"""Async httpx client for one vLLM OpenAI-compatible worker: chat streaming (SSE), health,
metrics and model list.

`stream_chat_completion` yields one `ChunkEvent` per SSE `data:` chunk until `data: [DONE]`.
Anything else raises `WorkerFailure`: a refused connection, a timeout on connect or on the
first event, a non-200 status, a `data: {"error": …}` event, a malformed chunk, or a body that
ends (or breaks) before `[DONE]`. `WorkerFailure.started` tells whether any chunk had already
been yielded, `retryable` whether another worker may be tried, `breaker` whether the failure
speaks against the worker (a 4xx for a bad request does not), `accepted` whether the worker
had answered 200 (so its engine took the request and may have spent tokens on it: metered),
`resend` whether the same worker may be asked once more (the connection closed before any
response: most often a kept-alive connection the server had just closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from inference.metrics import WorkerMetrics, parse_vllm_metrics
from supportbot.observability import context, tracing

logger = logging.getLogger(__name__)


class WorkerFailure(Exception):
    def __init__(
        self,
        detail: str,
        *,
        started: bool,
        retryable: bool = True,
        breaker: bool = True,
        status: int | None = None,
        accepted: bool = False,
        resend: bool = False,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.started = started
        self.retryable = retryable
        self.breaker = breaker
        self.status = status
        self.accepted = accepted
        self.resend = resend


@dataclass
class ChunkEvent:
    """One streamed chunk: text delta (may be empty), finish reason, usage (final chunk)."""

    content: str
    finish_reason: str | None
    usage: dict | None
    model: str | None


def chat_payload(
    *,
    model: str,
    messages: list[dict],
    max_tokens: int,
    temperature: float,
    response_format: dict | None = None,
    continuous_usage: bool = False,
) -> dict:
    """The request body vLLM expects for a streamed chat completion with a usage chunk.

    `continuous_usage` asks vLLM for running `usage` (prompt tokens, tokens generated so far)
    on every chunk, so a stream the caller abandons is still metered with the engine's counts.
    """
    stream_options: dict = {"include_usage": True}
    if continuous_usage:
        stream_options["continuous_usage_stats"] = True
    payload: dict = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": stream_options,
    }
    if response_format is not None:
        payload["response_format"] = response_format
    return payload


async def iter_sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Yield the `data` field of each SSE event (multi-line data joined by newlines).

    Comment lines (`:`) and other fields (`event:`, `id:`, `retry:`) are skipped. An event is
    dispatched at a blank line, or at the end of the body if data is pending.
    """
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r")
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
    if data:
        yield "\n".join(data)


def _parse_chunk(data: str, *, started: bool) -> ChunkEvent:
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as exc:
        raise WorkerFailure(f"malformed SSE chunk: {data[:120]!r}", started=started) from exc
    if not isinstance(obj, dict):
        raise WorkerFailure(f"unexpected SSE chunk: {data[:120]!r}", started=started)
    if "error" in obj:
        err = obj["error"]
        message = err.get("message", err) if isinstance(err, dict) else err
        raise WorkerFailure(f"worker reported an error mid-stream: {message}", started=started)
    content, finish = "", None
    for choice in obj.get("choices") or []:
        delta = choice.get("delta") or {}
        content += delta.get("content") or ""
        finish = choice.get("finish_reason") or finish
    return ChunkEvent(
        content=content, finish_reason=finish, usage=obj.get("usage"), model=obj.get("model")
    )


async def stream_chat_completion(
    client: httpx.AsyncClient,
    base_url: str,
    payload: dict,
    *,
    connect_timeout_s: float,
    first_byte_timeout_s: float,
    idle_timeout_s: float,
) -> AsyncIterator[ChunkEvent]:
    """Stream `POST {base_url}/v1/chat/completions`; see the module docstring for failures.

    Closing the iterator early closes the connection, which makes vLLM abort the request.
    """
    timeout = httpx.Timeout(
        connect=connect_timeout_s, read=idle_timeout_s, write=connect_timeout_s, pool=None
    )
    # The request id of the turn goes to the engine (vLLM takes X-Request-Id as the id of the
    # request in its own logs), with `traceparent` when tracing is on.
    span = tracing.start_span(
        "vllm.chat_completion",
        **{"server.address": base_url, "gen_ai.request.model": payload.get("model")},
    )
    headers = tracing.inject(context.outbound_headers(), span)
    logger.info("model call to %s", base_url, extra={"worker_url": base_url})
    request = client.build_request(
        "POST", f"{base_url}/v1/chat/completions", json=payload, timeout=timeout, headers=headers
    )
    try:
        # aclosing: closing this iterator early must close the response at once.
        async with contextlib.aclosing(
            _stream(client, request, first_byte_timeout_s=first_byte_timeout_s)
        ) as events:
            async for event in events:
                yield event
    except WorkerFailure as failure:
        if span is not None:
            span.set_attribute("error.type", failure.__class__.__name__)
            span.set_attribute("supportbot.failure", str(failure)[:200])
        raise
    finally:
        if span is not None:
            span.end()


async def _stream(
    client: httpx.AsyncClient, request: httpx.Request, *, first_byte_timeout_s: float
) -> AsyncIterator[ChunkEvent]:
    """Send `request`, yield one ChunkEvent per chunk until `[DONE]`, close the response."""
    loop = asyncio.get_running_loop()
    first_byte_deadline = loop.time() + first_byte_timeout_s
    response = await _send(client, request, first_byte_deadline=first_byte_deadline)
    started = False
    try:
        if response.status_code != 200:
            await _raise_status_failure(response)
        events = iter_sse_data(response.aiter_lines())
        while True:
            data = await _next_data(
                events, started=started, first_byte_deadline=first_byte_deadline
            )
            if data.strip() == "[DONE]":
                return
            try:
                event = _parse_chunk(data, started=started)
            except WorkerFailure as failure:
                failure.accepted = True
                raise
            started = True
            yield event
    finally:
        await response.aclose()


async def _send(
    client: httpx.AsyncClient, request: httpx.Request, *, first_byte_deadline: float
) -> httpx.Response:
    """Send the request and return the streaming response once its headers arrived; raise
    WorkerFailure (not started) if they do not by `first_byte_deadline` or the connection fails."""
    try:
        async with asyncio.timeout_at(first_byte_deadline):
            return await client.send(request, stream=True)
    except TimeoutError as exc:
        raise WorkerFailure("no response before the first-byte timeout", started=False) from exc
    except httpx.TimeoutException as exc:
        raise WorkerFailure(f"timeout: {exc.__class__.__name__}", started=False) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        # Connected, then closed or reset before any response: a pooled connection the server
        # closed as idle just as it was reused looks exactly like this. Not the worker's fault
        # by itself; a dead worker refuses the next connection and is marked down then.
        raise WorkerFailure(
            f"connection closed before a response: {exc!r}",
            started=False,
            breaker=False,
            resend=True,
        ) from exc
    except httpx.TransportError as exc:
        raise WorkerFailure(f"connection failed: {exc!r}", started=False) from exc


async def _raise_status_failure(response: httpx.Response) -> None:
    """Raise the WorkerFailure for a non-200 answer: a client error (4xx other than 408/429) is
    not retried and does not count against the worker; only a 5xx does."""
    body = (await response.aread())[:300].decode(errors="replace")
    status = response.status_code
    client_error = 400 <= status < 500 and status not in (408, 429)
    raise WorkerFailure(
        f"worker answered {status}: {body}",
        started=False,
        retryable=not client_error,
        breaker=status >= 500,
        status=status,
    )


async def _next_data(
    events: AsyncIterator[str], *, started: bool, first_byte_deadline: float
) -> str:
    """The next SSE `data` of the body (by `first_byte_deadline` while nothing was yielded);
    raise WorkerFailure (accepted) if the body ends, breaks or the first chunk is late."""
    try:
        if started:
            return await anext(events)
        async with asyncio.timeout_at(first_byte_deadline):
            return await anext(events)
    except StopAsyncIteration as exc:
        raise WorkerFailure("stream ended before [DONE]", started=started, accepted=True) from exc
    except TimeoutError as exc:
        raise WorkerFailure(
            "no chunk before the first-byte timeout", started=False, accepted=True
        ) from exc
    except httpx.HTTPError as exc:
        raise WorkerFailure(f"stream broke: {exc!r}", started=started, accepted=True) from exc


async def fetch_health(client: httpx.AsyncClient, base_url: str, *, timeout_s: float) -> None:
    """Return if `/health` answers 200; raise WorkerFailure otherwise."""
    try:
        response = await client.get(f"{base_url}/health", timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise WorkerFailure(f"/health unreachable: {exc!r}", started=False) from exc
    if response.status_code != 200:
        raise WorkerFailure(
            f"/health answered {response.status_code}", started=False, status=response.status_code
        )


async def fetch_metrics(
    client: httpx.AsyncClient, base_url: str, *, timeout_s: float
) -> WorkerMetrics:
    """Scrape and parse `/metrics`; raise WorkerFailure if unreachable or unparsable."""
    try:
        response = await client.get(f"{base_url}/metrics", timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise WorkerFailure(f"/metrics failed: {exc!r}", started=False) from exc
    try:
        return parse_vllm_metrics(response.text)
    except ValueError as exc:
        raise WorkerFailure(f"/metrics unparsable: {exc}", started=False) from exc


async def fetch_models(client: httpx.AsyncClient, base_url: str, *, timeout_s: float) -> list[dict]:
    """`GET /v1/models` -> its `data` list (`id`, `max_model_len`, …)."""
    try:
        response = await client.get(f"{base_url}/v1/models", timeout=timeout_s)
        response.raise_for_status()
        return list(response.json().get("data") or [])
    except (httpx.HTTPError, ValueError) as exc:
        raise WorkerFailure(f"/v1/models failed: {exc!r}", started=False) from exc
