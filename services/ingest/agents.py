"""Ingest agents: parse raw input and re-key by doc id; then order, deduplicate, version."""

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
from services.ingest.dedup import apply_change
from services.ingest.normalize import RawMessage, parse_raw
from shared.boundary import Boundary, export_counts
from shared.codec import decode, encode
from shared.records import Document

parse_boundary = Boundary("ingest", dlq_raw, keep_payload=True)
dedup_boundary = Boundary("ingest.dedup", dlq)
export_counts(app, settings.data_dir)


def _raw_message(message: Any) -> RawMessage:
    headers = dict(message.headers or [])
    return RawMessage(value=message.value, timestamp=message.timestamp, headers=headers)


@app.agent(raw_topic)
async def parse(stream: Any) -> None:
    """docs.raw.v1 (any key) -> docs.parsed.v1 keyed by doc id, or deadletter.raw.v1."""
    async for event in stream.events():
        async with parse_boundary.record(event):
            doc = parse_raw(_raw_message(event.message), settings)
            await parsed_topic.send(key=doc.doc_id.encode(), value=encode(doc))


@app.agent(parsed_topic)
async def deduplicate(stream: Any) -> None:
    """docs.parsed.v1 -> docs.normalized.v1: stale changes dead-lettered, repeats dropped."""
    async for event in stream.events():
        async with dedup_boundary.record(event):
            doc = decode(Document, event.message.value)
            prev = doc_versions.get(doc.doc_id)
            applied = apply_change(prev, doc)
            if applied.state != prev:
                doc_versions[doc.doc_id] = applied.state
            if applied.doc is not None:
                await normalized_topic.send(key=doc.doc_id.encode(), value=encode(applied.doc))
