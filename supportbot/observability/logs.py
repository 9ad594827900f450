"""JSON log lines (python-json-logger) with the request id, conversation id and trace ids of
the context they were written in."""

from __future__ import annotations

import logging

from pythonjsonlogger.json import JsonFormatter

from supportbot.observability import context, tracing

FIELDS = " ".join(
    f"%({name})s"
    for name in (
        "levelname",
        "name",
        "message",
        "request_id",
        "conversation_id",
        "trace_id",
        "span_id",
    )
)


class ContextFilter(logging.Filter):
    """Stamp each record with the ids of the current request (None outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = context.request_id()
        record.conversation_id = context.conversation_id()
        record.trace_id, record.span_id = tracing.log_ids()
        return True


class Formatter(JsonFormatter):
    """One JSON object per line; `timestamp` in ISO 8601 UTC; ids always present."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", True)
        super().__init__(FIELDS, *args, **kwargs)
