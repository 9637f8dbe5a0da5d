"""Redaction agent: micro-batch, redact, emit redacted docs and one audit record per partition.

Logs name batches, counts and offsets only, never a document's content.
"""

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
from services.redaction.audit import batch_id_for, build_batch, leaf_for
from services.redaction.redactor import Redactor
from shared.batching import current_event, partition_batches
from shared.boundary import Boundary, export_counts
from shared.codec import decode, encode
from shared.dlq import send_dead_letter
from shared.errors import InvalidInput
from shared.records import Document, RedactedDocument
from shared.topics import DOCS_NORMALIZED

log = logging.getLogger(__name__)
redactor: Redactor | None = None
boundary = Boundary("redaction", dlq)  # per document: a bad one never takes its batch along
export_counts(app, settings.data_dir)


@app.task
async def warm_up() -> None:
    global redactor
    redactor = await asyncio.to_thread(Redactor, settings)
    log.info("redactor ready, analyzer fingerprint %s", redactor.fingerprint[:16])


async def _valid(events: list[Any]) -> list[tuple[Any, Document]]:
    out = []
    for event in events:
        async with boundary.record(event):
            out.append((event, decode(Document, event.message.value)))
    return out


async def _redacted(ready: Redactor, valid: list[tuple[Any, Document]],
                    ) -> list[tuple[Any, Document, RedactedDocument]]:
    results = await asyncio.to_thread(ready.redact_isolated, [doc for _, doc in valid])
    out = []
    for (event, doc), result in zip(valid, results, strict=True):
        if isinstance(result, Exception):
            # The exception's message may quote the text; only its type is kept.
            exc = InvalidInput("redaction_failed", detail=type(result).__name__)
            await send_dead_letter(dlq, "redaction", exc, event.message)
        else:
            out.append((event, doc, result))
    return out


@app.agent(normalized_topic)
async def redact(stream: Any) -> None:
    """docs.normalized.v1 -> docs.redacted.v1 + audit.batches.v1."""
    async for groups in partition_batches(stream, settings.batch_max_docs,
                                          settings.batch_within_s):
        while redactor is None:
            await asyncio.sleep(0.1)
        for partition, events in groups.items():
            done = await _redacted(redactor, await _valid(events))
            if not done:
                continue
            leaves = [leaf_for(doc, red, ev.message.offset) for ev, doc, red in done]
            batch_id = batch_id_for(DOCS_NORMALIZED.name, partition, leaves)
            # Each redacted document names its batch, so an auditor can regroup the topic.
            redacted = [red.model_copy(update={"batch_id": batch_id}) for _, _, red in done]
            for red in redacted:
                await redacted_topic.send(key=red.doc_id.encode(), value=encode(red))
            batch = build_batch(DOCS_NORMALIZED.name, partition, leaves, redacted,
                                audit_chain.get(str(partition)), redactor.fingerprint)
            with current_event(stream, done[-1][0]):  # the table write goes to this partition
                audit_chain[str(partition)] = batch.root
            await audit_topic.send(key=str(partition).encode(), value=encode(batch))
            log.info("audit batch %s: %d docs, root %s", batch.batch_id, batch.doc_count,
                     batch.root[:16])
