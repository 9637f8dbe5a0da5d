"""Chunking agent: docs.redacted.v1 -> chunks.v1, one ChunkSet per document version."""

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
from shared.encoder.model import load_tokenizer
from shared.kafka import checkpoint
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker.boundary import Boundary, export_counts
from shared.worker.topology import Topology

# What build() wired this module's agent to: one topology per process.
app: faust.App
settings: ChunkingSettings
kafka: KafkaSettings
chunks_topic: Any
dlq: Any
boundary: Boundary
chunk: Any  # the Faust agent


def build(on: faust.App, chunking: ChunkingSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Register the chunking agent and its start-up task on `on`."""
    global app, settings, kafka, chunks_topic, dlq, boundary, chunk
    app, settings, kafka = on, chunking, kafka_settings
    topics = declare(app)
    chunks_topic, dlq = topics.chunks, topics.dlq
    # A chunker bug on one document dead-letters it (internal_error), never the stream's place.
    boundary = Boundary("chunking", dlq)
    export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                  metrics_port=settings.metrics_port)
    chunker.cache_clear()
    app.task(load_chunker)
    chunk = app.agent(topics.redacted, name=f"{__name__}.chunk")(chunk_documents)
    return Topology("chunking", app, settings, {"chunk": chunk})


@functools.cache
def chunker() -> DocumentChunker:
    """The chunker and its tokenizer, built once: at worker start-up, never at import."""
    return DocumentChunker(load_tokenizer(), settings.max_tokens, settings.overlap_tokens)


async def load_chunker() -> None:
    chunker()  # before the first record rather than inside its processing


def chunk_record(raw: bytes | None) -> ChunkSet:
    return chunker().chunk(decode(RedactedDocument, raw))


async def chunk_documents(stream: Any) -> None:
    """docs.redacted.v1 -> chunks.v1."""
    async for event in checkpoint.records(stream):
        async with boundary.record(event):
            chunk_set = chunk_record(event.message.value)
            spans.annotate(doc_id=chunk_set.doc_id, version=chunk_set.version,
                           chunks=len(chunk_set.chunks))
            key, value = chunk_set.doc_id.encode(), encode(chunk_set)
            sizes.check(value, key, "chunk set", kafka.max_record_bytes)  # or dead-lettered
            await chunks_topic.send(key=key, value=value)
