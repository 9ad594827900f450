"""What every step of a turn shares: the outcome and draft types, the event channel of the
turn, and how sync work runs (database in the turn's thread, CPU in a bounded pool)."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from asgiref.sync import sync_to_async

from conversations import events
from conversations.models import Message
from handoffs.models import Handoff
from knowledge.embeddings import embed_texts

Emit = Callable[[dict[str, Any]], Awaitable[None]]

# CPU work (embeddings, verification) runs here, never on the event loop or the database
# thread: at most one task per core at a time, whatever the number of concurrent turns.
CPU_WORKERS = max(1, int(os.environ.get("ORCHESTRATOR_CPU_WORKERS", os.cpu_count() or 2)))
_cpu_pool = ThreadPoolExecutor(max_workers=CPU_WORKERS, thread_name_prefix="turn-cpu")


async def noop(event: dict[str, Any]) -> None:
    return None


def db(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Run `fn` (ORM work) in the current turn's thread.

    Callers wrap each turn in `asgiref.sync.ThreadSensitiveContext` (the consumer does; the
    entry points below do when none is active), so turns of different conversations get
    threads of their own instead of the process's single shared one.
    """
    return sync_to_async(fn, thread_sensitive=True)


async def cpu(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Run CPU-bound `fn` in the bounded pool (sized to the cores)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_cpu_pool, functools.partial(fn, *args, **kwargs))


class TurnEmbedder:
    """Embeds each distinct text once per turn (passages, quotes, model sentences, question)."""

    def __init__(self, embed: Callable[[list[str]], list[list[float]]] = embed_texts) -> None:
        self._embed = embed
        self._cache: dict[str, list[float]] = {}
        self.computed = 0

    def __call__(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, vector in zip(missing, self._embed(missing), strict=True):
                self._cache[text] = list(np.asarray(vector, dtype=float))
            self.computed += len(missing)
        return [self._cache[t] for t in texts]


class TurnEvents:
    """Where a turn's events go.

    `publish` sends a conversation event to the conversation's group: every tab of the
    customer and every agent watching sees it once. A caller that is not a member of the
    group (an SSE response, the evaluation harness) also gets it through its own `emit`.
    `reply` answers the caller alone (acknowledgements, "another connection is answering").
    """

    def __init__(
        self,
        conversation_id: int,
        emit: Emit = noop,
        *,
        origin: str | None = None,
        subscribed: bool = False,
    ) -> None:
        self.conversation_id = conversation_id
        self._emit = emit
        self.origin = origin
        self.subscribed = subscribed

    async def publish(self, event: dict[str, Any]) -> None:
        await events.publish(self.conversation_id, event, origin=self.origin)
        if not self.subscribed:
            await self._emit(event)

    async def reply(self, event: dict[str, Any]) -> None:
        await self._emit(event)

    async def private(self, event: dict[str, Any]) -> None:
        """An event the group already receives from a committed write (ledger, handoffs):
        only a caller outside the group needs it sent directly."""
        if not self.subscribed:
            await self._emit(event)


@dataclass
class Outcome:
    customer_message: Message
    reply: Message | None
    duplicate: bool = False
    handoff: Handoff | None = None
    action: dict[str, Any] | None = None  # the action card this reply shows, if any


@dataclass
class Draft:
    """What the reply will say, with the passages it cites (1-based, in citation order)."""

    text: str
    kind: str
    passages: list[Any] = field(default_factory=list)
    quotes: dict[int, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    customer_state: str = Message.State.ANSWERED


@dataclass
class Turn:
    """One customer message being answered."""

    conversation: Any
    message: Message
    reply: Message
    events: TurnEvents
    started: float
    embedder: TurnEmbedder = field(default_factory=TurnEmbedder)
