"""Spans of records, batches and shard requests, read from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from shared.errors import InvalidInput
from shared.tracing import context, spans
from shared.tracing.context import parse
from shared.worker.boundary import Boundary

ROOT = Path(__file__).resolve().parents[4]
TID, SID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans.use_provider(provider)
    try:
        yield exporter
    finally:
        spans.disable()


def message(offset: int = 7, traceparent: str | None = f"00-{TID}-{SID}-01",
            topic: str = "docs.normalized.v1") -> SimpleNamespace:
    headers = [("traceparent", traceparent.encode())] if traceparent else []
    return SimpleNamespace(topic=topic, partition=2, offset=offset, key=b"k",
                           value=b"Anna Schmidt, +49 30 901820", headers=headers)


def only(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


def test_a_record_span_continues_the_producers_trace_and_its_outputs_continue_it(
        exported: InMemorySpanExporter) -> None:
    with spans.record("chunking", message()):
        spans.annotate(doc_id="doc-1", version=3, ignored=None)
        sent = parse(context.with_trace([])[0][1])
    span = only(exported)
    assert span.name == "chunking process" and span.kind == SpanKind.CONSUMER
    assert f"{span.context.trace_id:032x}" == TID and f"{span.parent.span_id:016x}" == SID
    assert span.attributes == {
        "messaging.system": "kafka", "messaging.destination.name": "docs.normalized.v1",
        "messaging.destination.partition.id": "2", "messaging.kafka.offset": 7,
        "messaging.operation.type": "process", "streamrag.stage": "chunking",
        "streamrag.doc_id": "doc-1", "streamrag.version": 3, "streamrag.outcome": "accepted"}
    # What the stage writes names this span as its parent, in the same trace.
    assert sent is not None and sent.trace_id == TID and sent.sampled
    assert sent.span_id == f"{span.context.span_id:016x}"
    assert context.outgoing.get() is None


def test_a_record_without_context_starts_a_sampled_trace_of_its_own(
        exported: InMemorySpanExporter) -> None:
    with spans.record("ingest", message(traceparent=None)):
        pass
    span = only(exported)
    assert span.parent is None and f"{span.context.trace_id:032x}" != TID


def test_an_unsampled_record_makes_no_span_but_its_outputs_keep_its_trace(
        exported: InMemorySpanExporter) -> None:
    with spans.record("chunking", message(traceparent=f"00-{TID}-{SID}-00")):
        sent = parse(context.with_trace([])[0][1])
    assert exported.get_finished_spans() == ()
    assert sent is not None and sent.trace_id == TID and not sent.sampled


def test_a_failing_block_records_the_error_type_never_its_message(
        exported: InMemorySpanExporter) -> None:
    with pytest.raises(ValueError), spans.record("redaction", message()):
        raise ValueError("anna.schmidt@example.com wrote +49 30 901820")
    span = only(exported)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "ValueError"
    dumped = span.to_json()
    assert "anna" not in dumped and "901820" not in dumped and span.events == ()


def test_the_boundary_marks_dead_letters_with_their_reason(
        exported: InMemorySpanExporter) -> None:
    carried: list[context.Outgoing | None] = []
    dlq = SimpleNamespace(send=AsyncMock(side_effect=lambda **_: carried.append(
        context.outgoing.get())))
    boundary = Boundary("stage-traced", dlq, on_fatal=pytest.fail)

    async def main() -> None:
        async with boundary.record(SimpleNamespace(message=message())):
            raise InvalidInput("too_deep", detail="nested")
        async with boundary.record(SimpleNamespace(message=message(8))):
            raise KeyError("the payload's own words")

    asyncio.run(main())
    first, second = exported.get_finished_spans()
    assert (first.attributes["streamrag.outcome"],
            first.attributes["streamrag.dead_letter.reason"]) == ("dead_lettered", "too_deep")
    assert second.attributes["streamrag.dead_letter.reason"] == "internal_error"
    assert "payload's own words" not in second.to_json()
    assert first.status.status_code == StatusCode.ERROR
    # Each dead letter went out inside its record's span: it carries that span's context.
    assert [parse(pair[0]).span_id for pair in carried if pair is not None] == [
        f"{first.context.span_id:016x}", f"{second.context.span_id:016x}"]


def test_a_batch_links_every_record_and_parents_on_the_first_sampled(
        exported: InMemorySpanExporter) -> None:
    unsampled = message(1, f"00-{os.urandom(16).hex()}-{SID}-00")
    other = f"{os.urandom(16).hex()}"
    records = [unsampled, message(2), message(3, f"00-{other}-{SID}-01"), message(4, None)]
    with spans.batch("redaction", records):
        audit = parse(context.with_trace([])[0][1])
    span = only(exported)
    assert span.name == "redaction batch"
    assert f"{span.context.trace_id:032x}" == TID  # the first sampled record's trace
    assert span.attributes["messaging.batch.message_count"] == 4
    linked = sorted(f"{link.context.trace_id:032x}" for link in span.links)
    assert linked == sorted([f"{int(unsampled.headers[0][1][3:35], 16):032x}", TID, other])
    assert audit is not None and audit.span_id == f"{span.context.span_id:016x}"


def test_a_batching_stage_sends_each_output_in_its_records_context(
        exported: InMemorySpanExporter) -> None:
    first, second = message(1), message(2, f"00-{os.urandom(16).hex()}-{SID}-01")
    with spans.record("redaction", first):
        pass
    with spans.record("redaction", second):
        pass
    a, b = exported.get_finished_spans()
    with spans.emitting(second):
        sent = parse(context.with_trace([])[0][1])
    assert sent is not None and sent.span_id == f"{b.context.span_id:016x}"
    with spans.emitting(first):
        sent = parse(context.with_trace([])[0][1])
    assert sent is not None and sent.span_id == f"{a.context.span_id:016x}"


def test_a_shard_request_span_is_a_child_of_the_query_and_links_the_batched_ones(
        exported: InMemorySpanExporter) -> None:
    from opentelemetry import trace

    tracer = trace.get_tracer("t", tracer_provider=spans._provider)
    with tracer.start_as_current_span("query a") as a, tracer.start_span("query b") as b:
        span, pair = spans.start_client("search shard 3", {"streamrag.queries": 2},
                                        spans.current_span(), [spans.span_link(b)])
        spans.finish(span, answered=True, error=None)
    shard = next(s for s in exported.get_finished_spans() if s.name == "search shard 3")
    assert shard.parent is not None and shard.parent.span_id == a.get_span_context().span_id
    assert [link.context.span_id for link in shard.links] == [b.get_span_context().span_id]
    assert shard.attributes["streamrag.answered"] is True
    assert "streamrag.error" not in shard.attributes and shard.kind == SpanKind.PRODUCER
    assert pair is not None and parse(pair[0]).span_id == f"{shard.context.span_id:016x}"  # type: ignore[union-attr]


def test_faust_sends_inside_a_record_carry_its_context() -> None:
    import faust

    from shared.kafka import trace_headers

    trace_headers.install()
    app = faust.App("trace-headers-test", broker="kafka://127.0.0.1:1", store="memory://",
                    autodiscover=False)
    topic = app.topic("x.v1", key_type=bytes, value_type=bytes, key_serializer="raw",
                      value_serializer="raw")
    pair = (f"00-{TID}-{SID}-01".encode(), None)

    async def made() -> tuple[Any, Any, Any]:
        outside = topic.as_future_message(key=b"k", value=b"v")
        with context.carrying(pair):
            inside = topic.as_future_message(key=b"k", value=b"v", headers={"a": b"1"})
            own = topic.as_future_message(key=b"k", value=b"v",
                                          headers=[("traceparent", b"mine")])
        return outside, inside, own

    outside, inside, own = asyncio.run(made())

    def found(fut: Any) -> dict[str, bytes]:
        headers = fut.message.headers
        return dict(headers.items() if isinstance(headers, dict) else headers)
    assert "traceparent" not in found(outside)
    assert found(inside) == {"a": b"1", "traceparent": pair[0]}
    assert found(own) == {"traceparent": b"mine"}


def test_tracing_off_imports_no_opentelemetry_and_still_carries_context() -> None:
    code = """
import sys, json
from types import SimpleNamespace
from shared.tracing import spans, context
spans.setup("x")
m = SimpleNamespace(topic="t", partition=0, offset=1, headers=[])
with spans.record("ingest", m):
    sent = context.with_trace([])
print(json.dumps({"enabled": spans.ENABLED, "sent": len(sent),
                  "otel": sorted(n for n in sys.modules if n.startswith("opentelemetry"))}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_TRACING_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=env, check=True).stdout
    assert json.loads(out) == {"enabled": False, "sent": 1, "otel": []}
