"""Spans per record, per micro-batch and per shard request, through the OpenTelemetry SDK.

Off by default (STREAMRAG_TRACING_EXPORTER=none): `setup` imports nothing, and `record`
only puts the record's trace context (or a new, unsampled one) on the sends inside it.
On, each stage's boundary opens one span per record, a child of the context in the
record's headers (a producer that set `traceparent` keeps its trace), with the messaging
attributes of OpenTelemetry's conventions and streamrag's own: stage, doc id and version
(`annotate`), outcome (accepted, deduplicated, dead_lettered with its reason).

A micro-batch (redaction, embedding) gets a span of its own, linked to every record it
took and a child of the first sampled one, so the audit batch it writes (and the ledger's
anchoring of it) sits in that record's trace and is one link away from the others'.

No span ever holds an exception's message or a record's content: exceptions are recorded
by type only (their messages may quote a payload), and attributes are ids and counts.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from shared.tracing import context
from shared.tracing.settings import TracingSettings

log = logging.getLogger(__name__)

ENABLED = False  # set by setup(); read on every record, so a plain module global
_tracer: Any = None
_provider: Any = None
_service = ""
# The span of the record in hand, for `annotate`/`outcome` from inside a stage's code.
_current: ContextVar[Any] = ContextVar("streamrag_trace_span", default=None)
# (topic, partition, offset) -> the context its span gave its outputs, for a batching stage
# that sends after the record's block ended (`emitting`). Bounded: oldest forgotten first.
_emitted: OrderedDict[tuple[str, int, int], context.Outgoing] = OrderedDict()
REMEMBERED = 8_192  # far above a micro-batch (redaction emits within its batch)


def setup(service: str, settings: TracingSettings | None = None) -> bool:
    """Start exporting spans of `service` if the settings say so (once per process)."""
    global ENABLED, _tracer, _provider, _service
    settings = settings or TracingSettings()
    if ENABLED or settings.exporter == "none":
        return ENABLED
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    exporter: Any
    if settings.exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint,
                                    insecure=settings.otlp_endpoint.startswith("http://"))
    else:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter = ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n")
    _provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.namespace": "streamrag"}),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)))
    _provider.add_span_processor(BatchSpanProcessor(
        exporter, max_queue_size=settings.max_queue_spans,
        schedule_delay_millis=settings.export_interval_ms))
    _tracer = _provider.get_tracer("streamrag")
    _service = service
    ENABLED = True
    log.info("tracing on: %s spans of %s, sampling %.0f%% of new traces", settings.exporter,
             service, settings.sample_ratio * 100)
    return True


def use_provider(provider: Any, service: str = "test") -> None:
    """Trace into `provider` (tests: an SDK provider with an in-memory exporter)."""
    global ENABLED, _tracer, _provider, _service
    _provider, _service = provider, service
    _tracer = provider.get_tracer("streamrag")
    ENABLED = True


def disable() -> None:
    """Stop making spans (tests); spans already queued are flushed."""
    global ENABLED, _tracer, _provider
    if _provider is not None:
        _provider.force_flush()
    ENABLED, _tracer, _provider = False, None, None
    _emitted.clear()


def flush(timeout_ms: int = 5000) -> None:
    if _provider is not None:
        _provider.force_flush(timeout_ms)


def _parent_context(parent: context.TraceParent | None, state: bytes | None) -> Any:
    """An OpenTelemetry Context whose current span is the remote parent (None: a root)."""
    if parent is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

    trace_state = TraceState.from_header([state.decode("latin-1")]) if state else None
    remote = SpanContext(int(parent.trace_id, 16), int(parent.span_id, 16), is_remote=True,
                         trace_flags=TraceFlags(1 if parent.sampled else 0),
                         trace_state=trace_state)
    return trace.set_span_in_context(NonRecordingSpan(remote))


def _link(headers: Any) -> Any:
    from opentelemetry.trace import Link

    parent, state = context.from_headers(headers)
    ctx = _parent_context(parent, state)
    if ctx is None:
        return None
    from opentelemetry import trace

    return Link(trace.get_current_span(ctx).get_span_context())


def pair_of(span: Any) -> context.Outgoing:
    """The traceparent (and tracestate) that makes `span` the parent of what is sent."""
    sc = span.get_span_context()
    parent = context.TraceParent(f"{sc.trace_id:032x}", f"{sc.span_id:016x}",
                                 bool(sc.trace_flags & 1))
    state = sc.trace_state.to_header() if sc.trace_state else ""
    return parent.header, (state.encode("latin-1") if state else None)


def _headers(message: Any) -> Any:
    """A consumed record's headers (None for a client that gives none)."""
    return getattr(message, "headers", None)


def _message_attributes(message: Any) -> dict[str, Any]:
    return {"messaging.system": "kafka",
            "messaging.destination.name": message.topic,
            "messaging.destination.partition.id": str(message.partition),
            "messaging.kafka.offset": int(message.offset)}


def _remember(message: Any, pair: context.Outgoing) -> None:
    _emitted[(message.topic, message.partition, message.offset)] = pair
    while len(_emitted) > REMEMBERED:
        _emitted.popitem(last=False)


@contextmanager
def record(stage: str, message: Any, operation: str = "process") -> Iterator[Any]:
    """One record's block in `stage`: its sends carry its trace; a span when tracing is on.

    Yields the span (None when off). An exception leaving the block is recorded on the span
    by type only and re-raised.
    """
    if not ENABLED:
        with context.carrying(context.continued(_headers(message))):
            yield None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    parent, state = context.from_headers(_headers(message))
    attributes = _message_attributes(message)
    attributes.update({"messaging.operation.type": "process", "streamrag.stage": stage})
    span = _tracer.start_span(f"{stage} {operation}", context=_parent_context(parent, state),
                              kind=SpanKind.CONSUMER, attributes=attributes)
    pair = pair_of(span)
    _remember(message, pair)
    token = _current.set(span)
    try:
        with context.carrying(pair):
            yield span
    except BaseException as exc:
        if isinstance(exc, Exception):
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        _current.reset(token)
        if span.is_recording() and "streamrag.outcome" not in (span.attributes or {}):
            span.set_attribute("streamrag.outcome", "accepted")
        span.end()


def annotate(**attributes: Any) -> None:
    """Attributes of the record in hand's span (`doc_id=..., version=...`): `streamrag.`
    is prefixed; None values are left out. No-op when tracing is off."""
    span = _current.get()
    if span is None or not span.is_recording():
        return
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(f"streamrag.{key}", value)


def outcome(what: str, reason: str | None = None) -> None:
    """How the record in hand ended: accepted (the default), deduplicated, dead_lettered."""
    span = _current.get()
    if span is None or not span.is_recording():
        return
    span.set_attribute("streamrag.outcome", what)
    if reason is not None:
        span.set_attribute("streamrag.dead_letter.reason", reason)
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, reason))


@contextmanager
def emitting(message: Any) -> Iterator[None]:
    """Sends inside carry the context `message`'s span gave its outputs (a batching stage
    sending after the record's block ended), or its own when no span was made."""
    pair = _emitted.get((message.topic, message.partition, message.offset)) if ENABLED else None
    with context.carrying(pair or context.continued(_headers(message))):
        yield


@contextmanager
def batch(stage: str, messages: Sequence[Any]) -> Iterator[Any]:
    """A micro-batch's span: linked to each record's context, a child of the first sampled
    one; sends inside carry it (the audit record of the batch)."""
    if not ENABLED or not messages:
        with context.carrying(context.continued(_headers(messages[0])) if messages else None):
            yield None
        return
    from opentelemetry.trace import SpanKind

    parents = [context.from_headers(_headers(m)) for m in messages]
    first = next((p for p in parents if p[0] is not None and p[0].sampled), parents[0])
    links = [link for link in (_link(_headers(m)) for m in messages) if link is not None]
    span = _tracer.start_span(
        f"{stage} batch", context=_parent_context(*first), kind=SpanKind.CONSUMER,
        links=links, attributes={"messaging.system": "kafka",
                                 "messaging.operation.type": "process",
                                 "messaging.batch.message_count": len(messages),
                                 "messaging.destination.name": messages[0].topic,
                                 "streamrag.stage": stage})
    try:
        with context.carrying(pair_of(span)):
            yield span
    finally:
        span.end()


def start_client(name: str, attributes: dict[str, Any], parent: Any = None,
                 links: Iterable[Any] = ()) -> tuple[Any, context.Outgoing | None]:
    """A PRODUCER span (a shard request) under `parent` (an OpenTelemetry span; default the
    current one), and the header pair its request carries; (None, None) when off. The
    caller ends it with `finish` when the answer came (or never will)."""
    if not ENABLED:
        return None, None
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    ctx = trace.set_span_in_context(parent) if parent is not None else None
    span = _tracer.start_span(name, context=ctx, kind=SpanKind.PRODUCER,
                              attributes=attributes, links=list(links))
    return span, pair_of(span)


def finish(span: Any, **attributes: Any) -> None:
    """End a span from `start_client`, with `streamrag.` attributes (None values skipped)."""
    if span is None:
        return
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(f"streamrag.{key}", value)
    span.end()


def current_span() -> Any:
    """The OpenTelemetry span current here (a gRPC call's), None when off."""
    if not ENABLED:
        return None
    from opentelemetry import trace

    return trace.get_current_span()


def span_link(span: Any) -> Any:
    from opentelemetry.trace import Link

    return Link(span.get_span_context())


def server_interceptors() -> list[Any]:
    """The standard gRPC instrumentation's server interceptor when tracing is on."""
    if not ENABLED:
        return []
    from opentelemetry.instrumentation.grpc import aio_server_interceptor

    return [aio_server_interceptor(tracer_provider=_provider)]
