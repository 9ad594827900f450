"""Metering: what one attempt on one worker received, counted in Prometheus and written as one
`InferenceUsage` row (in the background) however it ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async

from inference import services, telemetry
from inference.pool import released


@dataclass
class ReceivedAttempt:
    """What one attempt on one worker received, so it can be metered however it ends.

    Token counts come from the engine when it reported them: the final usage chunk, or the
    running usage vLLM puts on every chunk with `continuous_usage_stats`. Otherwise they are
    estimates (`estimated`): prompt tokens from `estimate_prompt_tokens` (characters / 3.5
    plus a few per message, leaning high), completion tokens = content deltas received (each
    delta holds at least one token, so this leans low). Tokens the engine generated after the
    last chunk we read, before it saw the disconnect, are not counted.
    """

    worker: str
    worker_id: int | None
    model: str
    started: float
    prompt_estimate: int
    accepted: bool = False  # at least one chunk arrived
    parts: list[str] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    first_at: float | None = None
    last_at: float | None = None
    usage: dict | None = None
    finish_reason: str | None = None

    def observe(self, event) -> None:
        self.accepted = True
        self.model = event.model or self.model
        self.finish_reason = event.finish_reason or self.finish_reason
        if event.usage:
            self.usage = event.usage
        if event.content:
            now = time.perf_counter()
            if self.first_at is None:
                self.first_at = now
            else:
                self.itl_ms.append((now - self.last_at) * 1000.0)
            self.last_at = now
            self.parts.append(event.content)

    def tokens(self) -> tuple[int, int, bool]:
        """(prompt tokens, completion tokens, estimated) consumed so far."""
        usage = self.usage or {}
        estimated = False
        prompt = usage.get("prompt_tokens")
        if not prompt:
            prompt, estimated = self.prompt_estimate, True
        completion = usage.get("completion_tokens")
        if completion is None or int(completion) < len(self.parts):
            completion, estimated = max(int(completion or 0), len(self.parts)), True
        return int(prompt), int(completion), estimated


def meter_attempt(
    pool, attempt: ReceivedAttempt, *, tenant_id: int, role: str, outcome: str, attempts: int
):
    """Count one model call in Prometheus and write its usage row in the background; return
    the tokens it used (what the tenant's bucket is charged)."""
    prompt, completion, estimated = attempt.tokens()
    telemetry.CALLS.labels(outcome).inc()
    telemetry.CALL_TOKENS.labels(outcome, "prompt").inc(prompt)
    telemetry.CALL_TOKENS.labels(outcome, "completion").inc(completion)
    telemetry.TOKENS.labels("prompt").inc(prompt)
    telemetry.TOKENS.labels("completion").inc(completion)
    _record(
        pool,
        tenant_id=tenant_id,
        worker_id=attempt.worker_id,
        worker_name=attempt.worker,
        model=attempt.model,
        role=role,
        outcome=outcome,
        prompt_tokens=prompt,
        completion_tokens=completion,
        ttft_ms=elapsed_ms(attempt.started, attempt.first_at),
        total_ms=(time.perf_counter() - attempt.started) * 1000.0,
        itl_ms=list(attempt.itl_ms),
        attempts=attempts,
        estimated=estimated,
    )
    return prompt + completion


def elapsed_ms(started: float, at: float | None) -> float | None:
    return None if at is None else (at - started) * 1000.0


def _record(pool, *, tenant_id: int, **fields) -> None:
    """Write the usage row in the background: the caller gets its result without waiting for
    the database (the ChatResult it saves with the answer is the authoritative copy)."""
    pool.spawn(
        sync_to_async(released(services.usage_record))(
            tenant_id=tenant_id, model_name=fields.pop("model"), **fields
        )
    )
