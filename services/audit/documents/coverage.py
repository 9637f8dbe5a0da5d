"""Reconcile redaction's input with what it left: every document version it consumed has an
audit leaf or a dead letter.

Redaction commits a batch's input offsets only once the batch's audit record and dead
letters are on the broker, and on a replay skips only offsets an audit record covers. So
every record of docs.normalized.v1 below the committed offset of redaction's group is named
by a leaf of an authentic audit record (the record's partition and offset, its doc id and
version) or by a dead letter (topic, partition, offset). A record with neither was passed
over by a commit without being handled: lost. Records at or past the committed offset are
in flight, never lost.

Evidence can be gone without anything being lost: audit records or dead letters past their
retention, an anchored batch whose record is missing. A record such missing evidence could
have accounted for is "unreconciled", with the reason, never "lost". (Redacted text that
expired does not matter here: the leaves are in the audit records.)

Pure logic: services.audit.documents.auditor reads the committed offsets first and the topics
after, so whatever a commit passed has its evidence on the broker by the time it is read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from shared.contract.records import AuditBatch, DeadLetter
from shared.contract.topics import DOCS_NORMALIZED
from shared.kafka.offsets import Committed

SHOWN = 20  # unreconciled records listed in the text report (the JSON lists all)


@dataclass(frozen=True)
class Input:
    """One record of docs.normalized.v1 as the check needs it (never its text)."""

    partition: int
    offset: int
    timestamp_ms: int
    doc_id: str | None = None  # None: not a Document (redaction dead-letters those)
    version: int | None = None


@dataclass(frozen=True)
class Gone:
    """Evidence no longer held, and the inputs it could have accounted for: those of
    `partition` (None: any) at offsets first..last written before `before_ms`."""

    why: str
    partition: int | None = None
    first: int = 0
    last: float = math.inf
    before_ms: float = math.inf

    def could_hold(self, x: Input) -> bool:
        return (self.partition in (None, x.partition) and self.first <= x.offset <= self.last
                and x.timestamp_ms < self.before_ms)


@dataclass(frozen=True)
class Gap:
    """An input below its partition's committed offset with neither a leaf nor a dead letter."""

    doc_id: str | None
    version: int | None
    topic: str
    partition: int
    offset: int
    group: str  # the group whose commit passed it
    committed: int
    why: str = ""  # unreconciled: the missing evidence that may have accounted for it

    def name(self) -> str:
        what = (f"{self.doc_id}@v{self.version}" if self.doc_id is not None
                else "(not a document)")
        return f"{what} at {self.topic}/{self.partition}@{self.offset}"


@dataclass
class Coverage:
    committed: dict[int, Committed] = field(default_factory=dict)
    checked: int = 0  # inputs below the committed offsets
    audited: int = 0
    dead_lettered: int = 0
    in_flight: int = 0
    lost: list[Gap] = field(default_factory=list)
    unreconciled: list[Gap] = field(default_factory=list)
    not_checked: str = ""  # why nothing could be reconciled (the topics were not readable)

    @property
    def ok(self) -> bool:
        return not self.lost


def reconcile_inputs(inputs: Iterable[Input], committed: Mapping[int, Committed],
                     batches: Iterable[AuditBatch], letters: Iterable[DeadLetter],
                     gone: Iterable[Gone] = ()) -> Coverage:
    """Account for every input below its partition's committed offset; `batches`: the
    authentic audit records only (a forged leaf accounts for nothing)."""
    leaves = {(b.partition, x.offset, x.doc_id, x.version) for b in batches for x in b.leaves}
    named = {(d.partition, d.offset) for d in letters if d.source_topic == DOCS_NORMALIZED.name}
    gone = list(gone)
    out = Coverage(dict(committed))
    for x in inputs:
        passed = committed.get(x.partition)
        if passed is None or x.offset >= passed.offset:
            out.in_flight += 1
            continue
        out.checked += 1
        if (x.partition, x.offset, x.doc_id, x.version) in leaves:
            out.audited += 1
        elif (x.partition, x.offset) in named:
            out.dead_lettered += 1
        else:
            why = next((g.why for g in gone if g.could_hold(x)), "")
            gap = Gap(x.doc_id, x.version, DOCS_NORMALIZED.name, x.partition, x.offset,
                      passed.group, passed.offset, why)
            (out.unreconciled if why else out.lost).append(gap)
    return out


def batch_span(batch_id: str) -> tuple[int, int, int] | None:
    """(partition, first, last offset) a batch id names, None for one that names none."""
    try:
        _, partition, span = batch_id.rsplit("/", 2)
        first, last = span.split("-")
        return int(partition), int(first), int(last)
    except ValueError:
        return None


def record_gone(batch_id: str, block_number: int) -> Gone:
    """An anchored batch whose authentic audit record is missing: its inputs, when its id
    names them, else any input."""
    span = batch_span(batch_id)
    why = f"anchored batch {batch_id} (block {block_number}) has no authentic audit record"
    if span is None:
        return Gone(why)
    partition, first, last = span
    return Gone(why, partition, first, last)


def expired(topic: str, first_written: Mapping[int, int | None]) -> Gone | None:
    """What retention took from `topic`: `first_written` maps each partition whose log no
    longer starts at offset 0 to the time (ms) of the first record it still holds, None
    when it holds none. An input written after every such time cannot have had its
    evidence there expire (its evidence was written after it)."""
    if not first_written:
        return None
    before = max(math.inf if t is None else t for t in first_written.values())
    when = ("any time" if before == math.inf else
            datetime.fromtimestamp(before / 1000, UTC).isoformat(timespec="seconds"))
    return Gone(f"{topic} no longer holds records written before {when} (retention or "
                "DeleteRecords)",
                before_ms=before)


def describe(c: Coverage) -> list[str]:
    """The report's lines: every lost input, the first unreconciled ones, and the totals."""
    if c.not_checked:
        return [f"inputs: NOT RECONCILED: {c.not_checked}"]
    lines = [f"lost: {g.name()}: {g.group} committed past it (to {g.committed}) and it has "
             "neither an audit leaf nor a dead letter" for g in c.lost]
    lines += [f"unreconciled: {g.name()}: {g.why}" for g in c.unreconciled[:SHOWN]]
    if len(c.unreconciled) > SHOWN:
        lines.append(f"unreconciled: ... and {len(c.unreconciled) - SHOWN} more (--json)")
    groups = sorted({x.group for x in c.committed.values()})
    passed = f"below the offsets {', '.join(groups)} committed" if groups else \
        "(no committed offsets: nothing consumed yet)"
    lines.append(f"inputs: {c.checked} records of {DOCS_NORMALIZED.name} {passed}: "
                 f"{c.audited} audited, {c.dead_lettered} dead-lettered, "
                 f"{len(c.lost)} LOST, {len(c.unreconciled)} unreconciled; "
                 f"{c.in_flight} in flight")
    return lines


def as_json(c: Coverage) -> dict[str, Any]:
    return {"checked": c.checked, "audited": c.audited, "dead_lettered": c.dead_lettered,
            "in_flight": c.in_flight, "not_checked": c.not_checked or None,
            "committed": {str(p): asdict(x) for p, x in sorted(c.committed.items())},
            "lost": [asdict(g) for g in c.lost],
            "unreconciled": [asdict(g) for g in c.unreconciled]}
