"""Chunking agent: docs.redacted.v1 -> chunks.v1, one ChunkSet per document version."""

from __future__ import annotations

import functools
import logging
from typing import Any

from services.chunking.app import app, chunks_topic, dlq, redacted_topic, settings
from services.chunking.documents import DocumentChunker
from shared.codec import decode, encode
from shared.dlq import send_dead_letter
from shared.encoder_model import load_tokenizer
from shared.errors import InvalidInput
from shared.records import ChunkSet, RedactedDocument

log = logging.getLogger(__name__)


@functools.cache
def chunker() -> DocumentChunker:
    """The chunker and its tokenizer, built once: at worker start-up, never at import."""
    return DocumentChunker(load_tokenizer(), settings.max_tokens, settings.overlap_tokens)


@app.task
async def load_chunker() -> None:
    chunker()  # before the first record rather than inside its processing


def chunk_record(raw: bytes | None) -> ChunkSet:
    doc = decode(RedactedDocument, raw)
    try:
        return chunker().chunk(doc)
    except Exception as exc:  # a chunker bug on one document must not lose the stream's place
        log.exception("chunking failed for %s v%d", doc.doc_id, doc.version)
        raise InvalidInput("chunking_failed", detail=type(exc).__name__) from exc


@app.agent(redacted_topic)
async def chunk(stream: Any) -> None:
    async for event in stream.events():
        try:
            chunk_set = chunk_record(event.value)
        except InvalidInput as exc:
            await send_dead_letter(dlq, "chunking", exc, event.message)
            continue
        await chunks_topic.send(key=chunk_set.doc_id.encode(), value=encode(chunk_set))
