"""Chunking agent: docs.redacted.v1 -> chunks.v1, one ChunkSet per document version.

A sealed document (shared/contract/sealed.py) is opened with the data-key store and its
chunk set sealed again under the same key; one whose key was destroyed (`streamrag
forget`) becomes a delete, so nothing of it is chunked and the compacted chunk topics drop
what they held of it; one whose key this store does not hold is dead-lettered
(key_unavailable).

The stage is one object, `Chunking`; its method is the agent `build` registers. Nothing
lives at module level.
"""

from __future__ import annotations

import functools
from typing import Any

import faust

from services.chunking.app import declare
from services.chunking.documents import DocumentChunker
from services.chunking.settings import ChunkingSettings
from shared.contract import sizes
from shared.contract.codec import decode, encode
from shared.contract.records import ChunkSet, RedactedDocument
from shared.contract.sealed import (
    Forgotten,
    KeyUnavailable,
    key_unavailable,
    open_with,
    seal_chunks,
    version_key,
)
from shared.encoder.model import load_tokenizer
from shared.kafka import checkpoint
from shared.keys.settings import KeySettings
from shared.keys.store import VersionKeys
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker.boundary import Boundary, export_counts
from shared.worker.topology import Topology


class Chunking:
    """One chunking stage on one app: its chunker (built at start-up), key store, topics."""

    def __init__(self, app: faust.App, settings: ChunkingSettings, kafka: KafkaSettings,
                 keys: KeySettings | None = None) -> None:
        self.app, self.settings, self.kafka = app, settings, kafka
        self.key_settings = keys or KeySettings()
        topics = declare(app)
        self.topics = topics
        self.chunks_topic, self.dlq = topics.chunks, topics.dlq
        # A chunker bug on one document dead-letters it (internal_error), never the
        # stream's place.
        self.boundary = Boundary("chunking", topics.dlq)
        self.chunk: Any = None  # the Faust agent, once registered

    def register(self) -> Topology:
        app, settings = self.app, self.settings
        export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                      metrics_port=settings.metrics_port)
        app.task(self.load_chunker)
        self.chunk = app.agent(self.topics.redacted, name=f"{__name__}.chunk")(
            self.chunk_documents)
        return Topology("chunking", app, settings, {"chunk": self.chunk}, self)

    @functools.cached_property
    def chunker(self) -> DocumentChunker:
        """The chunker and its tokenizer, built once: at worker start-up, never at build."""
        return DocumentChunker(load_tokenizer(), self.settings.max_tokens,
                               self.settings.overlap_tokens)

    @functools.cached_property
    def keys(self) -> VersionKeys:
        """The data-key store, opened at the first sealed document."""
        return VersionKeys.from_settings(self.key_settings)

    async def load_chunker(self) -> None:
        self.chunker  # noqa: B018 (before the first record rather than inside it)

    def chunk_record(self, raw: bytes | None) -> ChunkSet:
        """The version's chunk set, sealed under the version's key when the document was
        (a forgotten version's: its delete)."""
        doc = decode(RedactedDocument, raw)
        if not doc.sealed:
            return self.chunker.chunk(doc)
        try:
            key = version_key(doc.doc_id, doc.version, self.keys)
            opened = open_with(doc, key)
        except Forgotten:
            return self.chunker.chunk(doc.model_copy(update={"op": "delete", "key_id": "",
                                                             "sealed": ""}))
        except KeyUnavailable as exc:
            raise key_unavailable(doc.doc_id, doc.version) from exc
        return seal_chunks(self.chunker.chunk(opened), key)

    async def chunk_documents(self, stream: Any) -> None:
        """docs.redacted.v1 -> chunks.v1."""
        async for event in checkpoint.records(stream):
            async with self.boundary.record(event):
                chunk_set = self.chunk_record(event.message.value)
                spans.annotate(doc_id=chunk_set.doc_id, version=chunk_set.version,
                               chunks=len(chunk_set.chunks))
                key, value = chunk_set.doc_id.encode(), encode(chunk_set)
                # Too big for the broker: dead-lettered.
                sizes.check(value, key, "chunk set", self.kafka.max_record_bytes)
                await self.chunks_topic.send(key=key, value=value)


def build(on: faust.App, chunking: ChunkingSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Build a chunking stage on `on` and register its agent and start-up task."""
    return Chunking(on, chunking, kafka_settings).register()
