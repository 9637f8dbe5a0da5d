"""Re-derive every audit batch from the redacted topic and check it, its chain and its anchor.

Pure logic: the caller reads docs.redacted.v1, audit.batches.v1 and the chain. A batch
passes when its record is self-consistent (root over its own leaves), the documents that
name it on the redacted topic hash to the same root in topic order, its prev_root is the
root before it on its partition, and the chain holds the same root, prev_root and count.
Exact re-deliveries (at-least-once) are tolerated: they add nothing new.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from services.redaction.audit import GENESIS_ROOT, batch_root, content_sha256
from shared.records import AuditBatch, AuditLeaf, RedactedDocument

OnChain = tuple[str, str, int]  # root, prev_root (bare hex), leaf count
Ident = tuple[str, int]  # doc id, version


@dataclass
class BatchReport:
    batch_id: str
    partition: int
    docs: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Report:
    batches: list[BatchReport]
    orphans: list[str]  # redacted documents naming a batch no audit record has

    @property
    def ok(self) -> bool:
        return not self.orphans and all(b.ok for b in self.batches)


def redacted_leaf(doc: RedactedDocument, raw_sha256: str, offset: int) -> AuditLeaf:
    return AuditLeaf(doc_id=doc.doc_id, version=doc.version, offset=offset, raw_sha256=raw_sha256,
                     redacted_sha256=content_sha256(doc.title, doc.text, doc.metadata))


def _first_copies(docs: Iterable[RedactedDocument]) -> list[RedactedDocument]:
    seen: set[str] = set()
    out = []
    for doc in docs:
        if (key := doc.model_dump_json()) not in seen:
            seen.add(key)
            out.append(doc)
    return out


def diagnose(recorded: list[AuditLeaf], found: list[AuditLeaf]) -> list[str]:
    """Name what differs between the leaves a record holds and those the topic gives."""
    want = {(x.doc_id, x.version): x for x in recorded}
    got = {(x.doc_id, x.version): x for x in found}
    out = [f"dropped {d}@v{v}" for d, v in want.keys() - got.keys()]
    out += [f"inserted {d}@v{v}" for d, v in got.keys() - want.keys()]
    out += [f"changed {k[0]}@v{k[1]}" for k in want.keys() & got.keys()
            if want[k].redacted_sha256 != got[k].redacted_sha256]
    dupes = [k for k, n in Counter((x.doc_id, x.version) for x in found).items() if n > 1]
    out += [f"inserted a second {d}@v{v}" for d, v in dupes]
    if not out and [(x.doc_id, x.version) for x in recorded] != \
            [(x.doc_id, x.version) for x in found]:
        out.append("reordered")
    return sorted(out) or ["root differs"]


def check_batch(batch: AuditBatch, docs: list[RedactedDocument],
                on_chain: OnChain | None, prev_root: str | None) -> BatchReport:
    report = BatchReport(batch.batch_id, batch.partition, len(docs))
    if batch_root(batch.leaves) != batch.root or batch.doc_count != len(batch.leaves):
        report.problems.append("audit record inconsistent: root or count is not its leaves'")
    # The raw text is upstream of redaction and not re-read: its hash comes from the record.
    raw = {(x.doc_id, x.version): x for x in batch.leaves}
    found = []
    for doc in docs:
        rec = raw.get((doc.doc_id, doc.version))
        found.append(redacted_leaf(doc, rec.raw_sha256 if rec else "", rec.offset if rec else -1))
    if batch_root(found) != batch.root:
        report.problems += diagnose(list(batch.leaves), found)
    if prev_root is not None and batch.prev_root != prev_root:
        report.problems.append(f"chain broken: prev_root {batch.prev_root[:12]} is not the "
                               f"partition's previous root {prev_root[:12]}")
    if on_chain is None:
        report.problems.append("missing anchor")
    elif on_chain != (batch.root, batch.prev_root, len(batch.leaves)):
        report.problems.append(f"anchor differs: chain holds root {on_chain[0][:12]}")
    return report


def verify(docs: Iterable[RedactedDocument], batches: Iterable[AuditBatch],
           anchor_of: Callable[[str], OnChain | None]) -> Report:
    """Check every audit batch; `docs` in topic order (per partition, by offset)."""
    by_batch: dict[str, list[RedactedDocument]] = defaultdict(list)
    for doc in docs:
        by_batch[doc.batch_id].append(doc)
    records: dict[str, AuditBatch] = {}
    for batch in batches:
        records.setdefault(batch.batch_id, batch)  # a replayed record repeats the first
    chains: dict[int, str | None] = defaultdict(lambda: None)
    reports = []
    for batch in sorted(records.values(), key=lambda b: (b.partition, b.first_offset)):
        before = chains[batch.partition]
        if before is None and batch.prev_root == GENESIS_ROOT:
            before = GENESIS_ROOT  # a chain seen from its start; else history was trimmed
        reports.append(check_batch(batch, _first_copies(by_batch.get(batch.batch_id, [])),
                                   anchor_of(batch.batch_id), before))
        chains[batch.partition] = batch.root
    orphans = sorted({f"{d.doc_id}@v{d.version} names unknown batch {d.batch_id or '(none)'}"
                      for bid, ds in by_batch.items() if bid not in records for d in ds})
    return Report(reports, orphans)
