"""Typed failures of the inference gateway (re-exported by `inference.gateway`).

They subclass the product's `ApplicationError`, so an API view that lets one escape answers
with the right status and `Retry-After`; the orchestrator catches them to fall back or hand off.
"""

from __future__ import annotations

import math

from supportbot.errors import ApplicationError


class InferenceError(ApplicationError):
    """Base of every gateway failure; `.code` names the case."""

    status = 502
    code = "inference_error"


class InputTooLarge(InferenceError):
    """The prompt or `max_tokens` exceeds the hard caps; retrying the same request never helps."""

    status = 413
    code = "inference_input_too_large"


class UpstreamRejected(InferenceError):
    """A worker answered 4xx to the request itself (e.g. invalid schema); not retried."""

    status = 502
    code = "inference_upstream_rejected"


class _RetryAfterError(InferenceError):
    def __init__(self, detail: str, *, retry_after: float, **kwargs) -> None:
        self.retry_after = float(retry_after)
        extra = dict(kwargs.pop("extra", None) or {})
        extra["retry_after"] = max(1, math.ceil(self.retry_after))
        super().__init__(detail, extra=extra, **kwargs)


class TenantRateLimited(_RetryAfterError):
    """The tenant is over its token budget or concurrency cap (HTTP 429)."""

    status = 429
    code = "inference_tenant_rate_limited"


class PoolUnavailable(_RetryAfterError):
    """No healthy worker, all saturated past the queue deadline, or every attempt failed before
    the first byte (HTTP 503 with Retry-After)."""

    status = 503
    code = "inference_pool_unavailable"


class StreamBroken(InferenceError):
    """The stream failed after text reached the caller; `partial_text` is what was sent.

    Never retried (the caller already showed text): fall back or hand off instead.
    """

    status = 502
    code = "inference_stream_broken"

    def __init__(self, detail: str, *, partial_text: str, worker: str = "", **kwargs) -> None:
        super().__init__(detail, **kwargs)
        self.partial_text = partial_text
        self.worker = worker
