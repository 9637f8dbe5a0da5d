"""Ingest agents: parse raw input and re-key by doc id; then deduplicate and version."""

from __future__ import annotations

from typing import Any

from services.ingest.app import (
    app,
    dlq,
    dlq_raw,
    doc_versions,
    normalized_topic,
    parsed_topic,
    raw_topic,
    settings,
)
from services.ingest.dedup import next_version, seen
from services.ingest.normalize import RawMessage, parse_raw
from shared.codec import encode
from shared.dlq import decode_or_dead_letter, send_dead_letter
from shared.errors import InvalidInput
from shared.records import Document


def _raw_message(message: Any) -> RawMessage:
    headers = dict(message.headers or [])
    return RawMessage(value=message.value, timestamp=message.timestamp, headers=headers)


@app.agent(raw_topic)
async def parse(stream: Any) -> None:
    """docs.raw.v1 (any key) -> docs.parsed.v1 keyed by doc id, or deadletter.raw.v1."""
    async for event in stream.events():
        try:
            doc = parse_raw(_raw_message(event.message), settings)
        except InvalidInput as exc:
            await send_dead_letter(dlq_raw, "ingest", exc, event.message, keep_payload=True)
            continue
        await parsed_topic.send(key=doc.doc_id.encode(), value=encode(doc))


@app.agent(parsed_topic)
async def deduplicate(stream: Any) -> None:
    """docs.parsed.v1 -> docs.normalized.v1, dropping repeats and numbering versions."""
    async for event in stream.events():
        doc = await decode_or_dead_letter(Document, event, dlq, "ingest.dedup")
        if doc is None:
            continue
        new = next_version(doc_versions.get(doc.doc_id), doc)
        if new is None:
            continue
        doc_versions[doc.doc_id] = seen(new)
        await normalized_topic.send(key=new.doc_id.encode(), value=encode(new))
