"""Ingest agents: parse raw input and re-key by doc id; then order, deduplicate, version,
keep each source's event-time clock (watermark, lateness) per partition, and count every
change for the stream statistics (stats.counts.v1)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import faust
from aiokafka.partitioner import murmur2

from services.ingest.app import declare
from services.ingest.counts import CountsBuffer, change_counts, parse_failure_counts
from services.ingest.dedup import Applied, apply_change, truncated
from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.settings import IngestSettings
from services.ingest.watermarks import clock_key, observe, summarize
from shared.contract.codec import decode, encode
from shared.contract.records import Document, TableTruncate
from shared.contract.topics import DOCS_PARSED
from shared.errors import InvalidInput
from shared.kafka import checkpoint
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker import members
from shared.worker.boundary import Boundary, export_counts
from shared.worker.status_files import EVENT_TIME_FILE, write_json
from shared.worker.topology import Topology

stats = CountsBuffer()
# What build() wired this module's agents to: one topology per process.
app: faust.App
settings: IngestSettings
parsed_topic: Any
normalized_topic: Any
stats_topic: Any
doc_versions: Any
source_clocks: Any
parse_boundary: Boundary
dedup_boundary: Boundary
parse: Any  # the Faust agents
deduplicate: Any


def build(on: faust.App, ingest: IngestSettings, kafka: KafkaSettings) -> Topology:
    """Register ingest's agents, tables and timers on `on`."""
    global app, settings, parsed_topic, normalized_topic, stats_topic, doc_versions
    global source_clocks, parse_boundary, dedup_boundary, parse, deduplicate
    app, settings, t = on, ingest, declare(on)
    parsed_topic, normalized_topic, stats_topic = t.parsed, t.normalized, t.stats
    doc_versions, source_clocks = t.doc_versions, t.source_clocks
    parse_boundary = Boundary("ingest", t.dlq_raw, keep_payload=True)
    dedup_boundary = Boundary("ingest.dedup", t.dlq)
    export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                  metrics_port=settings.metrics_port)
    parse = app.agent(t.raw, name=f"{__name__}.parse")(parse_records)
    deduplicate = app.agent(t.parsed, name=f"{__name__}.deduplicate")(deduplicate_records)
    app.timer(1.0, name=f"{app.conf.id}.send_stats")(send_stats)
    app.timer(2.0, name=f"{app.conf.id}.export_event_time")(export_event_time)
    return Topology("ingest", app, settings, {"parse": parse, "deduplicate": deduplicate})


KIND_HEADER = "streamrag-kind"  # on docs.parsed.v1: absent for a Document
TRUNCATE = b"truncate"


def _header_pairs(message: Any) -> list[tuple[str, bytes]]:
    """A Faust message's headers as sent, repeats included (Faust gives a list or a dict)."""
    headers = message.headers or []
    return list(headers.items()) if isinstance(headers, dict) else list(headers)


def _raw_message(message: Any) -> RawMessage:
    return RawMessage.from_kafka(message.value, message.timestamp, _header_pairs(message))


def _kind(message: Any) -> bytes | None:
    return next((v for k, v in _header_pairs(message) if k == KIND_HEADER), None)


def _here(partition: int) -> Callable[[str], bool]:
    """Whether a doc id is keyed to `partition` of docs.parsed.v1 (the producer's default
    partitioner: murmur2 of the key), so a truncate touches only this partition's ids."""
    def here(doc_id: str) -> bool:
        return (murmur2(doc_id.encode()) & 0x7FFFFFFF) % DOCS_PARSED.partitions == partition
    return here


async def parse_records(stream: Any) -> None:
    """docs.raw.v1 (any key) -> docs.parsed.v1 keyed by doc id, or deadletter.raw.v1; a
    table's truncate to every partition."""
    async for event in checkpoint.records(stream):
        async with parse_boundary.record(event):
            try:
                doc = parse_raw(_raw_message(event.message), settings)
            except InvalidInput as exc:
                stats.add(parse_failure_counts(exc.reason))
                raise
            spans.annotate(doc_id=getattr(doc, "doc_id", None),
                           version=getattr(doc, "version", None))
            if isinstance(doc, TableTruncate):
                for partition in range(DOCS_PARSED.partitions):
                    await parsed_topic.send(key=doc.source.encode(), value=encode(doc),
                                            partition=partition,
                                            headers=[(KIND_HEADER, TRUNCATE)])
                continue
            await parsed_topic.send(key=doc.doc_id.encode(), value=encode(doc))


async def deduplicate_records(stream: Any) -> None:
    """docs.parsed.v1 -> docs.normalized.v1: stale changes dead-lettered, repeats dropped."""
    async for event in checkpoint.records(stream):
        async with dedup_boundary.record(event):
            if _kind(event.message) == TRUNCATE:
                await _truncate(decode(TableTruncate, event.message.value),
                                event.message.partition)
                continue
            doc = decode(Document, event.message.value)
            spans.annotate(doc_id=doc.doc_id, version=doc.version)
            prev = doc_versions.get(doc.doc_id)
            try:
                applied = apply_change(prev, doc)
            except InvalidInput as exc:
                _tick(doc, event.message.partition, None)
                stats.add(change_counts(doc, None, exc.reason))
                raise
            _tick(doc, event.message.partition, applied)
            stats.add(change_counts(doc, applied))
            if applied.state != prev:
                doc_versions[doc.doc_id] = applied.state
            if applied.doc is not None:
                await normalized_topic.send(key=doc.doc_id.encode(), value=encode(applied.doc))
            else:
                spans.outcome("deduplicated")


async def _truncate(cut: TableTruncate, partition: int) -> None:
    """Delete this partition's documents of the truncated table."""
    for delete, applied in truncated(list(doc_versions.items()), cut, _here(partition)):
        doc_versions[delete.doc_id] = applied.state
        stats.add(change_counts(delete, applied))
        if applied.doc is not None:
            await normalized_topic.send(key=delete.doc_id.encode(), value=encode(applied.doc))


async def send_stats() -> None:
    """The counts of the changes since the last call, one record per source and domain."""
    for counts in stats.drain():
        await stats_topic.send(key=counts.source.encode(), value=encode(counts))


def _tick(doc: Document, partition: int, applied: Applied | None) -> None:
    """Advance the source's clock on this partition by the change's event time."""
    key = clock_key(doc.source, partition)
    was_applied = applied is not None and applied.doc is not None
    seen = observe(source_clocks.get(key), doc.event_time, was_applied,
                   settings.allowed_lateness_s)
    source_clocks[key] = seen.clock


async def export_event_time() -> None:
    """Write each source's watermark and lag for `streamrag status` (this worker's part)."""
    now = time.time()
    sources = summarize(source_clocks.items(), settings.allowed_lateness_s, now)
    write_json(members.own_file(settings.data_dir / app.conf.id, EVENT_TIME_FILE), {
        "at": now, "allowed_lateness_s": settings.allowed_lateness_s,
        "sources": [vars(s) for s in sources]})
