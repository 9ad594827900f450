"""OpenTelemetry traces of a turn (receive → search → route → model → verify → send).

Off by default and then free: `span()` hands back one shared no-op context manager. It turns
on at start-up when the standard variables name an exporter: `OTEL_EXPORTER_OTLP_ENDPOINT`
or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (OTLP over HTTP to any collector), or
`OTEL_TRACES_EXPORTER=otlp|console`; `OTEL_SDK_DISABLED=true` keeps it off whatever else is
set. `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS` and the
batch processor's `OTEL_BSP_*` are read by the SDK itself. Spans carry the request and
conversation ids (`supportbot.request_id`, `supportbot.conversation_id`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

from supportbot.observability import context

_OFF = contextlib.nullcontext()
_provider: TracerProvider | None = None
_tracer: trace.Tracer | None = None


def enabled() -> bool:
    return _tracer is not None


def _exporter_from_env() -> SpanExporter | None:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    names = {n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n}
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if "none" in names:
        return None
    if "console" in names:
        return ConsoleSpanExporter()
    if "otlp" in names or endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    return None


def configure_from_env(service: str = "supportbot") -> bool:
    """Turn tracing on when the environment names an exporter; return whether it is on."""
    exporter = _exporter_from_env()
    if exporter is None:
        return False
    configure(exporter=exporter, batch=True, service=service)
    return True


def configure(*, exporter: SpanExporter, batch: bool = False, service: str = "supportbot"):
    """Send spans to `exporter` from now on (tests pass an in-memory exporter)."""
    global _provider, _tracer
    name = os.environ.get("OTEL_SERVICE_NAME") or service
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    _provider, _tracer = provider, provider.get_tracer("supportbot")
    return provider


def shutdown() -> None:
    """Flush and stop (tests, and processes that exit)."""
    global _provider, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = _tracer = None


def _attributes(extra: Mapping[str, Any]) -> dict[str, Any]:
    attrs = {k: v for k, v in extra.items() if v is not None}
    rid, cid = context.request_id(), context.conversation_id()
    if rid:
        attrs["supportbot.request_id"] = rid
    if cid is not None:
        attrs["supportbot.conversation_id"] = cid
    return attrs


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager:
    """A child of the current span for the block (a no-op when tracing is off)."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(name, attributes=_attributes(attributes))


def start_span(name: str, **attributes: Any) -> trace.Span | None:
    """A span the caller ends itself (for work that spans an async generator's yields)."""
    if _tracer is None:
        return None
    return _tracer.start_span(name, attributes=_attributes(attributes))


def inject(headers: dict[str, str], span: trace.Span | None = None) -> dict[str, str]:
    """Add W3C `traceparent` for `span` (or the current span) to `headers`."""
    if _tracer is not None:
        ctx = trace.set_span_in_context(span) if span is not None else None
        propagate.inject(headers, context=ctx)
    return headers


@contextlib.contextmanager
def continued(carrier: Mapping[str, str] | None, name: str, **attributes: Any) -> Iterator[None]:
    """A span continuing the trace named in `carrier` (a q2 task's enqueue-time headers)."""
    if _tracer is None:
        yield
        return
    parent = propagate.extract(dict(carrier or {}))
    with _tracer.start_as_current_span(name, context=parent, attributes=_attributes(attributes)):
        yield


def log_ids() -> tuple[str | None, str | None]:
    """(trace id, span id) of the current span as hex, for log lines; Nones when off."""
    if _tracer is None:
        return None, None
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None, None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
