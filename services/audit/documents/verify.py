"""Re-derive every audit batch from the redacted topic and check it, its chain and its anchor.

Pure logic: the caller reads docs.redacted.v1, audit.batches.v1 and the chain. A batch
passes when its record is signed by a known signer and self-consistent (root over its own
leaves), the documents that name it on the redacted topic match its leaves (each leaf's
document version and redacted hash, as often as the leaves hold it, in the leaves' order),
its prev_root is the root before it on its partition's chain (one chain per epoch
and partition, made of authentic records only), no other record claims its batch id, and
the chain holds the same root, prev_root, leaf count and signer.

Redeliveries (at-least-once) are recognised, never reported: a second record for a batch
id with the same substance (only created_at and the signature differ), a second copy of a
document, and documents of a batch whose record was never written (a crash mid-batch)
that are identical to leaves of the batch that was written after the replay.

The chain is read too, not only asked about the records found: every anchor of a known
signer whose authentic record is gone, and every batch whose redacted documents are gone
(a broker that lost its log, a deletion nobody declared), is "unprovable: evidence missing",
named with its block. Neither is tampering that verify could see, and neither is ever
verified.

Redacted text the broker was told to expire is not missing evidence: a leaf whose document
is gone from a topic kept for a finite text retention, in a batch recorded longer ago than
that retention, is "expired". Its signed record still proves the leaf (hashes, not text),
so the batch passes as `expired`, never as `ok`, and never when its document could not yet
have expired (Kafka deletes a record no sooner than its retention after its timestamp,
which is no earlier than its batch's `created_at`: redaction builds the record first).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.contract.audit_batches import batch_root, document_sha256
from shared.contract.audit_signing import check
from shared.contract.records import AuditBatch, AuditLeaf, RedactedDocument
from shared.contract.topics import AUDIT_BATCHES, DOCS_REDACTED

OnChain = tuple[str, str, int, str]  # root, prev_root (bare hex), leaf count, signer address
Ident = tuple[str, int, str]  # doc id, version, redacted sha256
SIGNATURE_PROBLEMS = {"unsigned": "unsigned record",
                      "bad_signature": "bad signature: it does not recover to its signer {signer}",
                      "unknown_signer": "unknown signer {signer}"}


@dataclass(frozen=True)
class ChainAnchor:
    """One anchor as the contract's Anchored event gives it."""

    key: str  # sha256 of the batch id, bare hex: the contract never sees the id itself
    root: str
    prev_root: str
    leaf_count: int
    signer: str
    block_number: int
    tx_hash: str
    contract: str


def batch_key(batch_id: str) -> str:
    return hashlib.sha256(batch_id.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TextRetention:
    """How long the broker keeps redacted text (its retention.ms on docs.redacted.v1; None:
    forever), and the time verify runs at."""

    retention_ms: int | None
    now: float

    def expired(self, batch: AuditBatch) -> bool:
        """Whether the broker may have deleted the documents of `batch` by now."""
        return (self.retention_ms is not None
                and batch.created_at + self.retention_ms / 1000 <= self.now)


KEPT_FOREVER = TextRetention(None, 0.0)


@dataclass
class BatchReport:
    batch_id: str
    partition: int
    docs: int
    problems: list[str] = field(default_factory=list)
    redelivered: int = 0  # extra copies of its record or documents, all harmless
    missing: list[str] = field(default_factory=list)  # leaves whose document is gone
    # Leaves whose document the text retention expired: proven by the record alone.
    expired: list[str] = field(default_factory=list)
    block_number: int | None = None  # of its anchor, when the chain was read

    @property
    def ok(self) -> bool:
        return not self.problems and not self.missing

    @property
    def result(self) -> str:
        """"failed" (tampering, forgery, conflict), "unprovable" (evidence missing),
        "expired" (text past its retention, leaves proven by the record), "ok"."""
        return ("failed" if self.problems else "unprovable" if self.missing else
                "expired" if self.expired else "ok")


@dataclass(frozen=True)
class Unprovable:
    """An anchored batch the chain holds a root for that nothing left can prove."""

    batch_id: str  # "(unknown: key <sha256 of the id>)" when no record or announcement names it
    block_number: int
    tx_hash: str
    missing: str  # what is gone


@dataclass
class Report:
    batches: list[BatchReport]
    orphans: list[str]  # redacted documents naming a batch no audit record has
    redelivered_docs: int = 0  # copies of documents under a batch id that was never recorded
    unprovable: list[Unprovable] = field(default_factory=list)
    chain_anchors: int = 0  # anchors of known signers found on chain (when it was read)

    @property
    def ok(self) -> bool:
        return not self.orphans and not self.unprovable and all(b.ok for b in self.batches)


def ident(doc: RedactedDocument) -> Ident:
    return doc.doc_id, doc.version, document_sha256(doc)


def substance(batch: AuditBatch) -> dict[str, Any]:
    """What a redelivered record repeats exactly: all but its time and signature."""
    return batch.model_dump(mode="json", exclude={"created_at", "signature"})


def differing_fields(a: AuditBatch, b: AuditBatch) -> list[str]:
    x, y = substance(a), substance(b)
    return sorted(k for k in x if x[k] != y[k])


def diagnose(recorded: list[AuditLeaf], docs: list[RedactedDocument],
             ) -> tuple[list[str], list[str], int]:
    """Hold a batch's documents on the topic (topic order, copies included) to the leaves
    its record holds: the problems (changed, inserted, reordered), the leaves whose
    document is not there at all (evidence missing: retention, a lost log; never
    verified), and how many documents are redelivered copies.

    The leaves are a multiset: the same document version read twice from the input (an
    upstream replay) is two leaves at two offsets, and two documents on the topic. Copies
    beyond that are redeliveries. Order is evidence too: the record's leaves must appear
    in the topic's documents in their order, not necessarily next to one another (a
    replay writes the whole batch again, in order, after what a first attempt wrote)."""
    want = Counter((x.doc_id, x.version, x.redacted_sha256) for x in recorded)
    versions = {(x.doc_id, x.version) for x in recorded}
    found = Counter(ident(d) for d in docs)
    out: list[str] = []
    for d, v, _ in sorted(found.keys() - want.keys()):
        if (d, v) not in versions:
            out.append(f"inserted {d}@v{v}")
        elif any((d, v, h) in found for (dd, vv, h) in want if (dd, vv) == (d, v)):
            out.append(f"inserted a second {d}@v{v}")
        else:
            out.append(f"changed {d}@v{v}")
    held = {(d, v) for d, v, _ in found}
    missing = sorted({f"{d}@v{v}" for (d, v, sha), n in want.items()
                      if (d, v) not in held or 0 < found[(d, v, sha)] < n})
    if not out and not missing and not _in_order(
            [(x.doc_id, x.version, x.redacted_sha256) for x in recorded], [ident(d) for d in docs]):
        out.append("reordered")
    copies = sum(max(0, n - want[k]) for k, n in found.items() if k in want)
    return sorted(set(out)), missing, copies


def _in_order(leaves: list[Ident], topic: list[Ident]) -> bool:
    """Whether `leaves` is a subsequence of `topic`."""
    it = iter(topic)
    return all(any(x == leaf for x in it) for leaf in leaves)


def check_anchor(batch: AuditBatch, on_chain: OnChain | None) -> list[str]:
    if on_chain is None:
        return ["missing anchor"]
    want = (batch.root, batch.prev_root, len(batch.leaves), batch.signer.lower())
    got = (on_chain[0], on_chain[1], on_chain[2], on_chain[3].lower())
    names = ("root", "prev_root", "leaf_count", "signer")
    return [f"anchor {name} differs: chain holds {_short(g)}, record has {_short(w)}"
            for name, w, g in zip(names, want, got, strict=True) if w != g]


def _short(value: object) -> str:
    return value[:12] if isinstance(value, str) and len(value) == 64 else str(value)


def check_documents(batch: AuditBatch, docs: list[RedactedDocument],
                    ) -> tuple[list[str], list[str], int]:
    """The problems of a batch's documents (all that name it, in topic order), the leaves
    whose document is gone, and the redelivered copies among them. The raw text is
    upstream of redaction and not re-read: its hash comes from the record, and a document
    that matches its leaf's redacted hash gives back that leaf, so a record consistent with
    its own leaves and matched by its documents has its root."""
    problems: list[str] = []
    if batch_root(batch.leaves) != batch.root or batch.doc_count != len(batch.leaves):
        problems.append("audit record inconsistent: root or count is not its leaves'")
    differ, missing, copies = diagnose(list(batch.leaves), docs)
    return problems + differ, missing, copies


class _Records:
    """The audit records grouped by batch id, each group's authentic one chosen."""

    def __init__(self, batches: Iterable[AuditBatch], known: frozenset[str]) -> None:
        self.by_id: dict[str, list[AuditBatch]] = defaultdict(list)
        for batch in batches:
            self.by_id[batch.batch_id].append(batch)
        self.known = known

    def authentic(self, batch: AuditBatch) -> bool:
        return check(batch, self.known) is None

    def chosen(self, batch_id: str) -> AuditBatch:
        group = self.by_id[batch_id]
        return next((b for b in group if self.authentic(b)), group[0])

    def problems(self, batch_id: str) -> tuple[list[str], int]:
        """Signature problems of the chosen record and conflicts with the others; and how
        many of the others are redeliveries."""
        chosen = self.chosen(batch_id)
        out = []
        if (why := check(chosen, self.known)) is not None:
            out.append(SIGNATURE_PROBLEMS[why].format(signer=chosen.signer or "(none)"))
        redelivered = 0
        for other in self.by_id[batch_id]:
            if other is chosen:
                continue
            fields = differing_fields(chosen, other)
            why = check(other, self.known)
            if not fields and why is None:
                redelivered += 1
                continue
            label = "conflicting record for this batch id" if fields else \
                "second record for this batch id"
            parts = [f"differs in {', '.join(fields)}"] if fields else []
            if why is not None:
                parts.append(SIGNATURE_PROBLEMS[why].format(signer=other.signer or "(none)"))
            out.append(f"{label}: {'; '.join(parts)}")
        return out, redelivered


def verify(docs: Iterable[RedactedDocument], batches: Iterable[AuditBatch],
           anchor_of: Callable[[str], OnChain | None], known: frozenset[str],
           chain: Iterable[ChainAnchor] = (), names: Iterable[str] = (),
           text: TextRetention = KEPT_FOREVER) -> Report:
    """Check every audit batch; `docs` and `batches` in topic order (per partition, by
    offset); `known`: the lower-case addresses whose signatures count; `chain`: every
    anchor of those signers on chain; `names`: batch ids known otherwise (announcements),
    to name an anchor whose record is gone; `text`: how long redacted text is kept, so a
    leaf whose document expired is told from one whose document went missing."""
    by_batch: dict[str, list[RedactedDocument]] = defaultdict(list)
    for doc in docs:
        by_batch[doc.batch_id].append(doc)
    records = _Records(batches, known)
    chosen = sorted((records.chosen(i) for i in records.by_id),
                    key=lambda b: (b.epoch, b.partition, b.first_offset, b.batch_id))
    chains: dict[tuple[str, int], AuditBatch] = {}
    chain = list(chain)
    # Roots the chain holds for batches whose record is gone: a record linking to one is
    # linked to an unprovable batch (reported as such), not a broken chain.
    present = {batch_key(b.batch_id) for b in chosen if records.authentic(b)}
    gone_roots = {a.root for a in chain if a.key not in present}
    reports = []
    for batch in chosen:
        mine = by_batch.get(batch.batch_id, [])
        found, missing, copies = check_documents(batch, mine)
        report = BatchReport(batch.batch_id, batch.partition, len(mine) - copies)
        report.problems, report.redelivered = records.problems(batch.batch_id)
        report.redelivered += copies
        # Expired only for an authentic record: a forged one proves nothing without its text.
        if missing and records.authentic(batch) and text.expired(batch):
            report.expired, missing = missing, []
        report.missing = missing
        report.problems += found
        if records.authentic(batch):  # a forgery is reported, never a link of the chain
            report.problems += _link(batch, chains.get((batch.epoch, batch.partition)),
                                     gone_roots)
            chains[(batch.epoch, batch.partition)] = batch
        report.problems += check_anchor(batch, anchor_of(batch.batch_id))
        reports.append(report)
    leaves = {(leaf.doc_id, leaf.version, leaf.redacted_sha256)
              for b in chosen if records.authentic(b) for leaf in b.leaves}
    strays = [d for bid, ds in by_batch.items() if bid not in records.by_id for d in ds]
    orphans = sorted({f"{d.doc_id}@v{d.version} names unknown batch {d.batch_id or '(none)'}"
                      for d in strays if ident(d) not in leaves})
    out = Report(reports, orphans, sum(ident(d) in leaves for d in strays))
    reconcile(out, chosen, records, chain, names)
    return out


def reconcile(report: Report, chosen: list[AuditBatch], records: _Records,
              chain: list[ChainAnchor], names: Iterable[str]) -> None:
    """Hold the report to the chain: every anchor is a batch verified, failed, or
    unprovable because its record or its documents are gone."""
    by_key = {batch_key(b.batch_id): (b, r) for b, r in zip(chosen, report.batches, strict=True)}
    named = {batch_key(i): i for i in names}
    latest = {a.key: a for a in chain}  # a reorg may show one twice; the newest holds
    report.chain_anchors = len(latest)
    for anchor in sorted(latest.values(), key=lambda a: (a.block_number, a.key)):
        found = by_key.get(anchor.key)
        if found is None or not records.authentic(found[0]):
            name = found[0].batch_id if found else named.get(
                anchor.key, f"(unknown: key {anchor.key})")
            why = (f"no audit record on {AUDIT_BATCHES.name}" if found is None else
                   f"no authentic audit record on {AUDIT_BATCHES.name}")
            report.unprovable.append(Unprovable(name, anchor.block_number, anchor.tx_hash, why))
            continue
        batch_report = found[1]
        batch_report.block_number = anchor.block_number
        if batch_report.missing:
            report.unprovable.append(Unprovable(
                batch_report.batch_id, anchor.block_number, anchor.tx_hash,
                f"{len(batch_report.missing)} of {len(found[0].leaves)} redacted documents not "
                f"on {DOCS_REDACTED.name}: {', '.join(batch_report.missing)}"))


def _link(batch: AuditBatch, before: AuditBatch | None, gone_roots: set[str]) -> list[str]:
    if before is None:
        # A chain seen from its start, or one whose history was trimmed: nothing to link.
        return []
    if batch.prev_root != before.root and batch.prev_root not in gone_roots:
        return [f"prev_root differs: record has {batch.prev_root[:12]}, the partition's "
                f"previous root (batch {before.batch_id}) is {before.root[:12]}"]
    return []

