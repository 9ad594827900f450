"""What every step of a turn shares: the outcome and draft types, the event channel of the
turn, and how sync work runs (database in the turn's thread, CPU in a bounded pool)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings

from conversations import events, services
from conversations.models import Message
from handoffs.models import Handoff
from knowledge.embeddings import embed_texts

Emit = Callable[[dict[str, Any]], Awaitable[None]]

# CPU work (embeddings, verification) runs here, never on the event loop or the database
# thread: at most one task per core at a time, whatever the number of concurrent turns.
# Sized by settings.ORCHESTRATOR_CPU_WORKERS, created on first use (not at import).
_cpu_pool: ThreadPoolExecutor | None = None
_cpu_pool_lock = threading.Lock()


def cpu_pool() -> ThreadPoolExecutor:
    """The process's executor for a turn's CPU work, created once."""
    global _cpu_pool
    if _cpu_pool is None:
        with _cpu_pool_lock:
            if _cpu_pool is None:
                _cpu_pool = ThreadPoolExecutor(
                    max_workers=settings.ORCHESTRATOR_CPU_WORKERS, thread_name_prefix="turn-cpu"
                )
    return _cpu_pool


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
    return await loop.run_in_executor(cpu_pool(), functools.partial(fn, *args, **kwargs))


class SentenceVectors:
    """A process-wide LRU of sentence embeddings (passage sentences recur across turns: the
    same help-center passages answer many questions). Thread-safe; bounded in entries."""

    def __init__(self, max_entries: int | None = None) -> None:
        """Keep at most `max_entries` (default: settings.ORCHESTRATOR_SENTENCE_CACHE_ENTRIES,
        read on use)."""
        self._max_entries = max_entries
        self._data: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def max_entries(self) -> int:
        if self._max_entries is not None:
            return self._max_entries
        return settings.ORCHESTRATOR_SENTENCE_CACHE_ENTRIES

    def get_many(self, texts: list[str]) -> dict[str, np.ndarray]:
        found = {}
        with self._lock:
            for text in texts:
                vector = self._data.get(text)
                if vector is not None:
                    self._data.move_to_end(text)
                    found[text] = vector
        return found

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        with self._lock:
            for text, vector in items.items():
                self._data[text] = vector
                self._data.move_to_end(text)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


SENTENCE_VECTORS = SentenceVectors()  # bounded by settings.ORCHESTRATOR_SENTENCE_CACHE_ENTRIES


class TurnEmbedder:
    """Embeds each distinct text at most once per turn (passages, quotes, model sentences,
    question), and not at all when a recent turn of this process already did.

    Thread-safe: a turn's CPU tasks (the verifier's setup, the extractive fallback composed
    beside it) may call it at once; the second waits for the first's texts instead of
    embedding them again."""

    def __init__(
        self,
        embed: Callable[[list[str]], list[list[float]]] = embed_texts,
        shared: SentenceVectors | None = SENTENCE_VECTORS,
    ) -> None:
        self._embed = embed
        self._shared = shared
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.computed = 0

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        with self._lock:
            return self._vectors(texts)

    def seed(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Take vectors computed elsewhere (a passage's, stored at indexing) for these texts."""
        with self._lock:
            for text, vector in vectors.items():
                self._cache.setdefault(text, vector)

    def _vectors(self, texts: list[str]) -> list[np.ndarray]:
        wanted = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if wanted and self._shared is not None:
            self._cache.update(self._shared.get_many(wanted))
            wanted = [t for t in wanted if t not in self._cache]
        if wanted:
            fresh = {
                text: np.asarray(vector, dtype=np.float32)
                for text, vector in zip(wanted, self._embed(wanted), strict=True)
            }
            self._cache.update(fresh)
            if self._shared is not None:
                self._shared.put_many(fresh)
            self.computed += len(wanted)
        return [self._cache[t] for t in texts]


FIRST_WORDS_EVENTS = frozenset({"answer.delta", "answer.completed"})


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
        self.first_words_at: float | None = None  # monotonic time of the answer's first words
        self.spoken: list[str] = []  # the answer text sent so far (`speak`)

    async def publish(self, event: dict[str, Any]) -> None:
        delivered = await events.publish(self.conversation_id, event, origin=self.origin)
        if self.first_words_at is None and event.get("type") in FIRST_WORDS_EVENTS:
            self.first_words_at = time.monotonic()
        if not self.subscribed or not delivered:
            # Outside the group, or the group send went nowhere (Redis down): the caller
            # still gets its own turn's events.
            await self._emit(event)

    async def speak(self, event: dict[str, Any]) -> bool:
        """Publish the bot's words only while the bot owns the conversation; False (nothing
        sent) once an agent took over (`conversations.services.conversation_while_bot_owns`:
        an agent's claim waits for a send in progress, so no word follows the takeover)."""

        def guarded() -> bool:
            with services.conversation_while_bot_owns(
                conversation_id=self.conversation_id
            ) as bot_owns:
                if bot_owns:
                    async_to_sync(self.publish)(event)
                    self.spoken.append(event.get("text", ""))
                return bot_owns

        return await db(guarded)()

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
