"""Chunking agent: docs.redacted.v1 -> chunks.v1, one ChunkSet per document version."""

from __future__ import annotations

from typing import Any

from services.chunking.app import app, chunks_topic, dlq, redacted_topic, settings
from services.chunking.documents import DocumentChunker
from shared.codec import decode, encode
from shared.dlq import send_dead_letter
from shared.embedder import load_tokenizer
from shared.errors import InvalidInput
from shared.records import RedactedDocument

chunker = DocumentChunker(load_tokenizer(), settings.max_tokens)


@app.agent(redacted_topic)
async def chunk(stream: Any) -> None:
    async for event in stream.events():
        try:
            doc = decode(RedactedDocument, event.value)
        except InvalidInput as exc:
            await send_dead_letter(dlq, "chunking", exc, event.message)
            continue
        chunk_set = chunker.chunk(doc)
        await chunks_topic.send(key=doc.doc_id.encode(), value=encode(chunk_set))
