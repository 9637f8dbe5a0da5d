"""Redaction agent: micro-batch, redact, emit redacted docs and one audit record per partition."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from services.redaction.app import (
    app,
    audit_chain,
    audit_topic,
    dlq,
    normalized_topic,
    redacted_topic,
    settings,
)
from services.redaction.audit import build_batch, leaf_for
from services.redaction.redactor import Redactor
from shared.batching import make_current, partition_batches
from shared.codec import decode, encode
from shared.dlq import send_dead_letter
from shared.errors import InvalidInput
from shared.records import Document
from shared.topics import DOCS_NORMALIZED

log = logging.getLogger(__name__)
redactor: Redactor | None = None


@app.task
async def warm_up() -> None:
    global redactor
    redactor = await asyncio.to_thread(Redactor, settings)
    log.info("redactor ready, analyzer fingerprint %s", redactor.fingerprint[:16])


async def _valid(events: list[Any]) -> list[tuple[Any, Document]]:
    out = []
    for event in events:
        try:
            out.append((event, decode(Document, event.value)))
        except InvalidInput as exc:
            await send_dead_letter(dlq, "redaction", exc, event.message)
    return out


@app.agent(normalized_topic)
async def redact(stream: Any) -> None:
    """docs.normalized.v1 -> docs.redacted.v1 + audit.batches.v1."""
    async for groups in partition_batches(stream, settings.batch_max_docs,
                                          settings.batch_within_s):
        while redactor is None:
            await asyncio.sleep(0.1)
        for partition, events in groups.items():
            valid = await _valid(events)
            if not valid:
                continue
            docs = [doc for _, doc in valid]
            redacted = await asyncio.to_thread(redactor.redact_documents, docs)
            for red in redacted:
                await redacted_topic.send(key=red.doc_id.encode(), value=encode(red))
            leaves = [leaf_for(doc, red, ev.message.offset)
                      for (ev, doc), red in zip(valid, redacted, strict=True)]
            make_current(stream, valid[-1][0])
            batch = build_batch(DOCS_NORMALIZED.name, partition, leaves, redacted,
                                audit_chain.get(str(partition)), redactor.fingerprint)
            audit_chain[str(partition)] = batch.root
            await audit_topic.send(key=str(partition).encode(), value=encode(batch))
            log.info("audit batch %s: %d docs, root %s", batch.batch_id, batch.doc_count,
                     batch.root[:16])
