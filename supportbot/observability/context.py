"""The ids that tie one request together: a request id (one HTTP request, one WebSocket
event and everything it causes: the turn, its q2 tasks, its model calls) and the
conversation id. Both live in context variables, so asyncio tasks and asgiref's threads
(`database_sync_to_async`, `ThreadSensitiveContext`) carry them without being passed."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

REQUEST_ID_HEADER = "X-Request-Id"
_VALID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

request_id_var: ContextVar[str | None] = ContextVar("supportbot_request_id", default=None)
conversation_id_var: ContextVar[int | None] = ContextVar("supportbot_conversation_id", default=None)


def new_request_id() -> str:
    return uuid.uuid4().hex


def clean_request_id(value: object) -> str | None:
    """An incoming id if it is short and plain (letters, digits, `._:-`); else None."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if isinstance(value, str) and _VALID.match(value):
        return value
    return None


def request_id() -> str | None:
    return request_id_var.get()


def conversation_id() -> int | None:
    return conversation_id_var.get()


def set_conversation(conversation_id: int | None) -> None:
    """Name the conversation of the current request (from here on, in this context)."""
    conversation_id_var.set(conversation_id)


@contextlib.contextmanager
def bound(*, request_id: str | None, conversation_id: int | None = None) -> Iterator[None]:
    """Run a block under these ids, restoring the previous ones afterwards."""
    tokens = (request_id_var.set(request_id), conversation_id_var.set(conversation_id))
    try:
        yield
    finally:
        request_id_var.reset(tokens[0])
        conversation_id_var.reset(tokens[1])


def outbound_headers() -> dict[str, str]:
    """Headers that carry the current request id to another service (the vLLM engine)."""
    rid = request_id_var.get()
    return {REQUEST_ID_HEADER: rid} if rid else {}
