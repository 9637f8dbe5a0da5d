"""Read what reconciling redaction's input needs (services.audit.documents.coverage): its groups'
committed offsets, docs.normalized.v1, the dead letters, and what retention took from the
audit records and dead letters.

The committed offsets are read first (`read_commits`), before the audit records: redaction
commits only once a batch's outputs are on the broker, so every topic read after them
holds the evidence of whatever they passed. Each topic is read to the end offsets taken
when its reading starts, so the check ends under live traffic; a record that arrives
meanwhile is past the offsets read and counts as in flight. docs.normalized.v1 holds raw
text: only each record's doc id, version, partition, offset and time are kept.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError

from services.audit.documents.coverage import (
    Coverage,
    Input,
    expired,
    reconcile_inputs,
    record_gone,
)
from services.audit.documents.verify import Report
from shared.contract.audit_signing import check
from shared.contract.codec import decode
from shared.contract.records import AuditBatch, DeadLetter, Document
from shared.contract.topics import AUDIT_BATCHES, DEADLETTER, DOCS_NORMALIZED
from shared.errors import InvalidInput
from shared.kafka.offsets import Committed, committed, first_written, groups_of, refused, visible
from shared.kafka.reader import read_topic
from shared.settings import KafkaSettings

GROUPS = groups_of("redaction")


class RefusedError(Exception):
    """The broker refused this principal what reconciling needs (ACLs)."""


def _run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except KafkaError as exc:
        if not refused(exc):
            raise
        msg = (f"the broker refused it ({type(exc).__name__}): it needs Read on "
               f"{DOCS_NORMALIZED.name} and {DEADLETTER.name} and Describe on the groups "
               f"{', '.join(GROUPS)}")
        raise RefusedError(msg) from exc


def read_commits(kafka: KafkaSettings) -> dict[int, Committed]:
    """Per partition of docs.normalized.v1, the furthest offset redaction committed."""
    tps = [TopicPartition(DOCS_NORMALIZED.name, p) for p in range(DOCS_NORMALIZED.partitions)]
    found = _run(committed(kafka, GROUPS, tps))
    return {tp.partition: c for tp, c in found.items()}


def _input(record: Any) -> Input:
    try:
        doc = decode(Document, record.value)
    except InvalidInput:
        return Input(record.partition, record.offset, record.timestamp)
    return Input(record.partition, record.offset, record.timestamp, doc.doc_id, doc.version)


async def _read(kafka: KafkaSettings) -> tuple[list[Input], list[DeadLetter],
                                               dict[str, dict[int, int | None]]]:
    hidden = {DOCS_NORMALIZED.name, DEADLETTER.name} - await visible(kafka)
    if hidden:
        raise TopicAuthorizationFailedError(", ".join(sorted(hidden)))
    inputs = [_input(r) for r in await read_topic(kafka, DOCS_NORMALIZED)]
    letters = []
    for r in await read_topic(kafka, DEADLETTER):
        try:
            letters.append(decode(DeadLetter, r.value))
        except InvalidInput:
            continue  # not a dead letter: it names no input
    trimmed = {spec.name: await first_written(kafka, spec) for spec in (AUDIT_BATCHES, DEADLETTER)}
    return inputs, letters, trimmed


def read_coverage(kafka: KafkaSettings, commits: dict[int, Committed],
                  batches: list[AuditBatch], report: Report, known: frozenset[str]) -> Coverage:
    """Redaction's input reconciled with the audit records `batches` (read after
    `commits`), the dead letters and what the report found gone."""
    if not commits:
        return Coverage()  # nothing committed: every input is in flight
    try:
        inputs, letters, trimmed = _run(_read(kafka))
    except RefusedError as exc:
        return Coverage(commits, not_checked=f"{DOCS_NORMALIZED.name} not read: {exc}")
    authentic = [b for b in batches if check(b, known) is None]
    ids = {b.batch_id for b in authentic}
    gone = [record_gone(u.batch_id, u.block_number) for u in report.unprovable
            if u.batch_id not in ids]
    gone += [g for name, held in trimmed.items() if (g := expired(name, held)) is not None]
    return reconcile_inputs(inputs, commits, authentic, letters, gone)
