"""What `stream_chat` yields: text deltas, then one final `ChatResult`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ChatDelta:
    text: str


@dataclass
class ChatResult:
    """The final record of a completed stream (yielded last)."""

    text: str
    model: str
    worker: str
    prompt_tokens: int
    completion_tokens: int
    ttft_ms: float
    total_ms: float
    itl_ms: list[float] = field(default_factory=list)
    finish_reason: str | None = None
