"""Ingest agents: parse raw input and re-key by doc id; then order, deduplicate, version,
keep each source's event-time clock (watermark, lateness) per partition, and count every
change for the stream statistics (stats.counts.v1).

What it writes on is sealed (shared/contract/sealed.py): a parsed change under its
document's transit key, a versioned one under its version's data key, and its content
hash keyed, so a forget or the text retention leaves nothing readable on either topic.

The stage is one object, `Ingest`, built with its settings, topics, tables and boundaries;
its methods are the agents and timers `build` registers, its counts buffer a field.
Nothing lives at module level but constants and pure helpers."""

from __future__ import annotations

import asyncio
import functools
import logging
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
from shared.contract import forget
from shared.contract.codec import decode, encode
from shared.contract.forget import is_forget
from shared.contract.records import Document, TableTruncate
from shared.contract.sealed import Forgotten, KeyUnavailable, forgotten, key_unavailable, seal
from shared.contract.sealed import open_document as open_sealed
from shared.contract.topics import DOCS_PARSED
from shared.errors import InvalidInput
from shared.kafka import checkpoint
from shared.keys.settings import KeySettings
from shared.keys.store import Destroyed, VersionKeys
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker import members
from shared.worker.boundary import Boundary, export_counts
from shared.worker.status_files import EVENT_TIME_FILE, write_json
from shared.worker.topology import Topology

log = logging.getLogger(__name__)

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


class Ingest:
    """One ingest stage on one app: what it parses, dedups, counts and clocks."""

    def __init__(self, app: faust.App, settings: IngestSettings) -> None:
        self.app, self.settings = app, settings
        t = declare(app)
        self.topics = t
        self.parsed_topic, self.normalized_topic, self.stats_topic = t.parsed, t.normalized, t.stats
        self.doc_versions, self.source_clocks = t.doc_versions, t.source_clocks
        self.parse_boundary = Boundary("ingest", t.dlq_raw, keep_payload=True)
        self.dedup_boundary = Boundary("ingest.dedup", t.dlq)
        self.stats = CountsBuffer()
        self.key_settings = KeySettings()
        # How long docs.parsed.v1 keeps what the transit keys sealed (None: for ever).
        self.parsed_kept_ms = forget.kept_ms()[DOCS_PARSED.name]
        self.parse: Any = None  # the Faust agents, once registered
        self.deduplicate: Any = None

    @functools.cached_property
    def keys(self) -> VersionKeys:
        """The data-key store (opened at the first record, not at import or build)."""
        return VersionKeys.from_settings(self.key_settings)

    def register(self) -> Topology:
        """Register the agents, tables' users and timers on the app."""
        app, settings = self.app, self.settings
        export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                      metrics_port=settings.metrics_port)
        self.parse = app.agent(self.topics.raw, name=f"{__name__}.parse")(self.parse_records)
        self.deduplicate = app.agent(self.topics.parsed, name=f"{__name__}.deduplicate")(
            self.deduplicate_records)
        app.timer(1.0, name=f"{app.conf.id}.send_stats")(self.send_stats)
        app.timer(2.0, name=f"{app.conf.id}.export_event_time")(self.export_event_time)
        if settings.seal:
            app.timer(60.0, name=f"{app.conf.id}.expire_transit_keys")(self.expire_transit_keys)
        return Topology("ingest", app, settings,
                        {"parse": self.parse, "deduplicate": self.deduplicate}, self)

    async def parse_records(self, stream: Any) -> None:
        """docs.raw.v1 (any key) -> docs.parsed.v1 keyed by doc id, or deadletter.raw.v1; a
        table's truncate to every partition."""
        async for event in checkpoint.records(stream):
            async with self.parse_boundary.record(event):
                try:
                    doc = parse_raw(_raw_message(event.message), self.settings)
                except InvalidInput as exc:
                    self.stats.add(parse_failure_counts(exc.reason))
                    raise
                spans.annotate(doc_id=getattr(doc, "doc_id", None),
                               version=getattr(doc, "version", None))
                if self.settings.seal and isinstance(doc, Document):
                    doc = await asyncio.to_thread(self._parsed_sealed, doc)
                if isinstance(doc, TableTruncate):
                    for partition in range(DOCS_PARSED.partitions):
                        await self.parsed_topic.send(key=doc.source.encode(), value=encode(doc),
                                                     partition=partition,
                                                     headers=[(KIND_HEADER, TRUNCATE)])
                    continue
                await self.parsed_topic.send(key=doc.doc_id.encode(), value=encode(doc))

    async def deduplicate_records(self, stream: Any) -> None:
        """docs.parsed.v1 -> docs.normalized.v1: stale changes dead-lettered, repeats
        dropped, and a change replayed after a crash that its table record survived sent
        again (apply_change: its output may not have reached the broker)."""
        async for event in checkpoint.records(stream):
            async with self.dedup_boundary.record(event):
                msg = event.message
                if _kind(msg) == TRUNCATE:
                    await self._truncate(decode(TableTruncate, msg.value), msg.partition)
                    continue
                doc = await self._opened(decode(Document, msg.value))
                spans.annotate(doc_id=doc.doc_id, version=doc.version)
                prev = self.doc_versions.get(doc.doc_id)
                try:
                    applied = apply_change(prev, doc, at=(msg.partition, msg.offset))
                except InvalidInput as exc:
                    self._tick(doc, msg.partition, None)
                    self.stats.add(change_counts(doc, None, exc.reason))
                    raise
                out = await self._versioned(applied.doc)  # before the table: a forgotten
                self._tick(doc, msg.partition, applied)  # version changes nothing
                self.stats.add(change_counts(doc, applied))
                if applied.state != prev:
                    self.doc_versions[doc.doc_id] = applied.state
                if out is not None:
                    await self.normalized_topic.send(key=doc.doc_id.encode(),
                                                     value=encode(out))
                else:
                    spans.outcome("deduplicated")

    def _parsed_sealed(self, doc: Document) -> Document:
        """A parsed change as docs.parsed.v1 gets it: its content hash keyed, its text
        sealed under the document's transit key; a forget closes that key first, so what
        is parsed after it is sealed under a new one the forget does not destroy."""
        keys = self.keys
        doc = doc.model_copy(update={"content_hash": keys.content_mac(doc.content_hash)})
        if is_forget(doc):
            keys.close_transit(doc.doc_id)
        if doc.op != "upsert":
            return doc
        return seal(doc, keys.transit(doc.doc_id, rotate_s=self.settings.transit_rotation_s))

    async def _opened(self, doc: Document) -> Document:
        """A parsed change in clear; dead-lettered `forgotten` when a forget (or the
        retention) destroyed its transit key first, `key_unavailable` when this key store
        never had it."""
        if not doc.sealed:
            return doc
        try:
            return await asyncio.to_thread(open_sealed, doc, self.keys)
        except Forgotten as exc:
            raise forgotten(doc.doc_id, doc.version, exc.marker) from None
        except KeyUnavailable:
            raise key_unavailable(doc.doc_id, doc.version) from None

    async def _versioned(self, doc: Document | None) -> Document | None:
        """A versioned change as docs.normalized.v1 gets it: sealed under its version's
        key (made here; redaction seals its output under the same one). A version whose
        key is gone (a replay of a forgotten one) is dead-lettered `forgotten`."""
        if doc is None or doc.op != "upsert" or not self.settings.seal:
            return doc
        made = await asyncio.to_thread(self.keys.create, [(doc.doc_id, doc.version)])
        key = made[(doc.doc_id, doc.version)]
        if isinstance(key, Destroyed):
            raise forgotten(doc.doc_id, doc.version, key)
        return seal(doc, key)

    async def expire_transit_keys(self) -> int:  # a timer
        """Destroy the transit keys older than docs.parsed.v1 keeps what they sealed (a
        record is gone within two of its retentions: Kafka deletes whole segments)."""
        kept = self.parsed_kept_ms
        if kept is None:
            return 0
        before = time.time() - 2 * kept / 1000 - self.settings.transit_rotation_s
        gone = await asyncio.to_thread(self.keys.expire, before, "parsed retention",
                                       None, True)
        if gone:
            log.info("%d transit keys past the parsed retention destroyed", gone)
        return gone

    async def _truncate(self, cut: TableTruncate, partition: int) -> None:
        """Delete this partition's documents of the truncated table."""
        for delete, applied in truncated(list(self.doc_versions.items()), cut,
                                         _here(partition)):
            self.doc_versions[delete.doc_id] = applied.state
            self.stats.add(change_counts(delete, applied))
            if applied.doc is not None:
                await self.normalized_topic.send(key=delete.doc_id.encode(),
                                                 value=encode(applied.doc))

    async def send_stats(self) -> None:
        """The counts of the changes since the last call, one record per source and domain."""
        for counts in self.stats.drain():
            await self.stats_topic.send(key=counts.source.encode(), value=encode(counts))

    def _tick(self, doc: Document, partition: int, applied: Applied | None) -> None:
        """Advance the source's clock on this partition by the change's event time."""
        key = clock_key(doc.source, partition)
        was_applied = applied is not None and applied.doc is not None
        seen = observe(self.source_clocks.get(key), doc.event_time, was_applied,
                       self.settings.allowed_lateness_s)
        self.source_clocks[key] = seen.clock

    async def export_event_time(self) -> None:
        """Write each source's watermark and lag for `streamrag status` (this worker's
        part)."""
        now = time.time()
        settings = self.settings
        sources = summarize(self.source_clocks.items(), settings.allowed_lateness_s, now)
        write_json(members.own_file(settings.data_dir / self.app.conf.id, EVENT_TIME_FILE), {
            "at": now, "allowed_lateness_s": settings.allowed_lateness_s,
            "sources": [vars(s) for s in sources]})


def build(on: faust.App, ingest: IngestSettings, kafka: KafkaSettings) -> Topology:
    """Build an ingest stage on `on` and register its agents, tables and timers."""
    return Ingest(on, ingest).register()
