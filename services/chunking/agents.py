"""Chunking agent: docs.redacted.v1 -> chunks.v1, one ChunkSet per document version."""

from __future__ import annotations

import functools
from typing import Any

from services.chunking.app import app, chunks_topic, dlq, kafka, redacted_topic, settings
from services.chunking.documents import DocumentChunker
from shared.contract import sizes
from shared.contract.codec import decode, encode
from shared.contract.records import ChunkSet, RedactedDocument
from shared.encoder.model import load_tokenizer
from shared.kafka import checkpoint
from shared.tracing import spans
from shared.worker.boundary import Boundary, export_counts

# A chunker bug on one document dead-letters it (internal_error), never the stream's place.
boundary = Boundary("chunking", dlq)
export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
              metrics_port=settings.metrics_port)


@functools.cache
def chunker() -> DocumentChunker:
    """The chunker and its tokenizer, built once: at worker start-up, never at import."""
    return DocumentChunker(load_tokenizer(), settings.max_tokens, settings.overlap_tokens)


@app.task
async def load_chunker() -> None:
    chunker()  # before the first record rather than inside its processing


def chunk_record(raw: bytes | None) -> ChunkSet:
    return chunker().chunk(decode(RedactedDocument, raw))


@app.agent(redacted_topic)
async def chunk(stream: Any) -> None:
    async for event in checkpoint.records(stream):
        async with boundary.record(event):
            chunk_set = chunk_record(event.message.value)
            spans.annotate(doc_id=chunk_set.doc_id, version=chunk_set.version,
                           chunks=len(chunk_set.chunks))
            key, value = chunk_set.doc_id.encode(), encode(chunk_set)
            sizes.check(value, key, "chunk set", kafka.max_record_bytes)  # or dead-lettered
            await chunks_topic.send(key=key, value=value)
