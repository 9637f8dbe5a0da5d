"""The audit verifier passes a clean history and names each kind of tampering."""

from __future__ import annotations

import pytest

from services.redaction.audit import build_batch, leaf_for, prove
from services.redaction.verify import OnChain, Report, verify
from shared.records import AuditBatch, Document, RedactedDocument

TOPIC = "docs.normalized.v1"


def history() -> tuple[list[RedactedDocument], list[AuditBatch]]:
    """Two partitions, three batches of three documents each, chained per partition."""
    docs, batches = [], []
    for partition in (0, 1):
        prev = None
        for b in range(3):
            raws = [Document(doc_id=f"p{partition}-d{b}{i}", version=1 + i % 2,
                             text=f"Mail jane{b}{i}@example.com now", source="s",
                             event_time=0, ingest_time=0) for i in range(3)]
            reds = [RedactedDocument(**r.model_dump(exclude={"text"}), text="Mail <EMAIL> now",
                                     entity_counts={"EMAIL_ADDRESS": 1}) for r in raws]
            leaves = [leaf_for(r, d, 10 * b + i) for i, (r, d) in enumerate(zip(raws, reds,
                                                                                 strict=True))]
            batch = build_batch(TOPIC, partition, leaves, reds, prev, "fp", 1.0)
            docs += [d.model_copy(update={"batch_id": batch.batch_id}) for d in reds]
            batches.append(batch)
            prev = batch.root
    return docs, batches


def chain_of(batches: list[AuditBatch]) -> dict[str, OnChain]:
    return {b.batch_id: (b.root, b.prev_root, len(b.leaves)) for b in batches}


def run(docs: list[RedactedDocument], batches: list[AuditBatch],
        anchors: dict[str, OnChain] | None = None) -> Report:
    on_chain = chain_of(history()[1]) if anchors is None else anchors
    return verify(docs, batches, on_chain.get)


def problems(report: Report) -> dict[str, list[str]]:
    return {b.batch_id: b.problems for b in report.batches if b.problems}


def test_clean_history_passes() -> None:
    docs, batches = history()
    report = run(docs, batches)
    assert report.ok and len(report.batches) == 6 and not report.orphans
    assert [b.docs for b in report.batches] == [3] * 6


def test_replayed_deliveries_are_harmless() -> None:
    docs, batches = history()
    assert run(docs + docs[3:6], batches + batches[1:2]).ok


def test_changed_record_is_named() -> None:
    docs, batches = history()
    docs[4] = docs[4].model_copy(update={"text": "Mail jane11@example.com now"})
    assert problems(run(docs, batches)) == {batches[1].batch_id: ["changed p0-d11@v2"]}


def test_dropped_record_is_named() -> None:
    docs, batches = history()
    del docs[5]
    assert problems(run(docs, batches)) == {batches[1].batch_id: ["dropped p0-d12@v1"]}


def test_inserted_record_is_named() -> None:
    docs, batches = history()
    extra = docs[4].model_copy(update={"doc_id": "intruder", "text": "planted"})
    docs.insert(5, extra)
    assert problems(run(docs, batches)) == {batches[1].batch_id: ["inserted intruder@v2"]}


def test_reordered_records_are_named() -> None:
    docs, batches = history()
    docs[3], docs[4] = docs[4], docs[3]
    assert problems(run(docs, batches)) == {batches[1].batch_id: ["reordered"]}


def test_missing_anchor_is_named() -> None:
    docs, batches = history()
    anchors = chain_of(batches)
    del anchors[batches[4].batch_id]
    assert problems(run(docs, batches, anchors)) == {batches[4].batch_id: ["missing anchor"]}


def test_anchor_with_another_root_is_named() -> None:
    docs, batches = history()
    anchors = chain_of(batches)
    anchors[batches[2].batch_id] = ("ab" * 32, batches[2].prev_root, 3)
    assert problems(run(docs, batches, anchors)) == {
        batches[2].batch_id: ["anchor differs: chain holds root abababababab"]}


def test_rewritten_audit_record_is_caught_by_its_leaves_and_the_chain() -> None:
    docs, batches = history()
    forged = batches[1].model_copy(update={"root": "cd" * 32})
    found = problems(run(docs, [batches[0], forged, *batches[2:]]))
    assert "audit record inconsistent: root or count is not its leaves'" in \
        found[batches[1].batch_id]
    assert "anchor differs: chain holds root " + batches[1].root[:12] in \
        found[batches[1].batch_id]
    assert found[batches[2].batch_id][0].startswith("chain broken")


def test_removed_audit_record_breaks_the_chain_and_orphans_its_documents() -> None:
    docs, batches = history()
    report = run(docs, batches[:1] + batches[2:])
    assert list(problems(report)) == [batches[2].batch_id]
    assert problems(report)[batches[2].batch_id][0].startswith("chain broken")
    assert len(report.orphans) == 3 and batches[1].batch_id in report.orphans[0]


def test_every_document_has_a_proof_that_holds_and_a_tampered_one_fails() -> None:
    _, batches = history()
    for batch in batches:
        for leaf in batch.leaves:
            proof = prove(batch, leaf.doc_id)
            assert proof.holds() and proof.leaf == leaf and proof.root == batch.root
    proof = prove(batches[0], batches[0].leaves[1].doc_id)
    forged = proof.leaf.model_copy(update={"raw_sha256": "00" * 32})
    assert not type(proof)(**{**proof.__dict__, "leaf": forged}).holds()
    with pytest.raises(KeyError):
        prove(batches[0], "not-there")
