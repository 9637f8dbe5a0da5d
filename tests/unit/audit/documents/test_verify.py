"""The audit verifier passes a clean history, never flags a redelivery, and names each kind
of tampering, forgery and conflict."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from services.audit.documents.verify import OnChain, Report, verify
from shared.contract.audit_batches import Tip, build_batch, leaf_for, prove
from shared.contract.audit_signing import DEV_SIGNER, sign
from shared.contract.records import AuditBatch, Document, RedactedDocument
from tests.unit.audit.documents.audit_history import (
    KEY,
    KNOWN,
    PER_BATCH,
    TOPIC,
    chain_of,
    history,
)

STRANGER_KEY = SecretStr("0x" + "42" * 32)


def run(docs: list[RedactedDocument], batches: list[AuditBatch],
        anchors: dict[str, OnChain] | None = None) -> Report:
    on_chain = chain_of(history()[1]) if anchors is None else anchors
    return verify(docs, batches, on_chain.get, KNOWN)


def problems(report: Report) -> dict[str, list[str]]:
    return {b.batch_id: b.problems for b in report.batches if b.problems}


def test_clean_history_passes() -> None:
    docs, batches = history()
    report = run(docs, batches)
    assert report.ok and len(report.batches) == 6 and not report.orphans
    assert [b.docs for b in report.batches] == [3] * 6
    assert batches[0].batch_id == f"e1/{TOPIC}/0/0-4"


def test_replayed_deliveries_are_recognised_not_flagged() -> None:
    docs, batches = history()
    # The same batch formed again after a crash: same substance, new time and signature.
    again = sign(batches[1].model_copy(update={"created_at": 99.0, "signature": ""}), KEY)
    assert again.signature != batches[1].signature
    report = run(docs + docs[3:6], batches + [again])
    assert report.ok, problems(report)
    assert report.batches[1].redelivered == 4  # one record, three documents


def test_documents_of_a_batch_cut_short_by_a_crash_are_redeliveries_not_orphans() -> None:
    docs, batches = history()
    # The first attempt sent two documents naming its batch, then died before the record.
    cut_short = [d.model_copy(update={"batch_id": f"e1/{TOPIC}/0/10-12"}) for d in docs[3:5]]
    report = run(cut_short + docs, batches)
    assert report.ok and not report.orphans and report.redelivered_docs == 2


def test_a_fresh_epoch_starts_its_own_chain() -> None:
    old_docs, old = history("e1")
    new_docs, new = history("e2")
    report = verify(old_docs + new_docs, old + new, {**chain_of(old), **chain_of(new)}.get,
                    KNOWN)
    assert report.ok and len(report.batches) == 12


def test_changed_record_is_named() -> None:
    docs, batches = history()
    docs[4] = docs[4].model_copy(update={"text": "Mail jane11@example.com now"})
    assert problems(run(docs, batches)) == {batches[1].batch_id: ["changed p0-d11@v2"]}


def test_a_document_that_is_gone_makes_its_batch_unprovable_not_verified() -> None:
    docs, batches = history()
    del docs[5]
    report = run(docs, batches)
    assert not problems(report) and not report.ok
    (gone,) = [b for b in report.batches if not b.ok]
    assert (gone.batch_id, gone.result, gone.missing) == (batches[1].batch_id, "unprovable",
                                                          ["p0-d12@v1"])


def test_inserted_record_is_named() -> None:
    docs, batches = history()
    extra = docs[4].model_copy(update={"doc_id": "intruder", "text": "planted"})
    docs.insert(5, extra)
    assert problems(run(docs, batches)) == {batches[1].batch_id: ["inserted intruder@v2"]}


def test_reordered_records_are_named() -> None:
    docs, batches = history()
    docs[3], docs[4] = docs[4], docs[3]
    assert problems(run(docs, batches)) == {batches[1].batch_id: ["reordered"]}


def twice_read_batch() -> tuple[list[RedactedDocument], AuditBatch]:
    """A batch whose input held one document version twice (an upstream replay wrote it
    again at offset 2): two leaves, two documents on the topic, both legitimately there."""
    raws = [Document(doc_id=f"d{i}", version=1, text=f"Mail jane{i}@example.com now",
                     source="s", event_time=0, ingest_time=0) for i in (0, 1, 0, 2)]
    reds = [RedactedDocument(**r.model_dump(exclude={"text"}), text="Mail <EMAIL> now",
                             entity_counts={"EMAIL_ADDRESS": 1}) for r in raws]
    leaves = [leaf_for(r, d, i) for i, (r, d) in enumerate(zip(raws, reds, strict=True))]
    batch = sign(build_batch(TOPIC, 0, (0, 3), leaves, reds, Tip.genesis("e1"), "fp", 1.0),
                 KEY)
    return [d.model_copy(update={"batch_id": batch.batch_id}) for d in reds], batch


def test_a_document_version_read_twice_is_two_leaves_not_a_redelivery() -> None:
    docs, batch = twice_read_batch()
    report = verify(docs, [batch], chain_of([batch]).get, KNOWN)
    assert report.ok, problems(report)
    assert (report.batches[0].docs, report.batches[0].redelivered) == (4, 0)
    # Replayed after a crash: a first attempt wrote d1 and d0, then the whole batch again.
    report = verify(docs[1:3] + docs, [batch], chain_of([batch]).get, KNOWN)
    assert report.ok and report.batches[0].redelivered == 2, problems(report)
    # One of the two copies gone: that leaf has no document, the batch is unprovable.
    report = verify(docs[:2] + docs[3:], [batch], chain_of([batch]).get, KNOWN)
    assert not problems(report) and report.batches[0].missing == ["d0@v1"]
    # Its two copies the other way round around d1: out of the leaves' order.
    swapped = [docs[1], docs[0], docs[2], docs[3]]
    assert problems(verify(swapped, [batch], chain_of([batch]).get, KNOWN)) == {
        batch.batch_id: ["reordered"]}


def test_missing_anchor_is_named() -> None:
    docs, batches = history()
    anchors = chain_of(batches)
    del anchors[batches[4].batch_id]
    assert problems(run(docs, batches, anchors)) == {batches[4].batch_id: ["missing anchor"]}


@pytest.mark.parametrize(("index", "field"), [(0, "root"), (1, "prev_root"),
                                              (2, "leaf_count"), (3, "signer")])
def test_an_anchor_that_differs_is_named_by_its_field(index: int, field: str) -> None:
    docs, batches = history()
    anchors = chain_of(batches)
    held = list(anchors[batches[2].batch_id])
    held[index] = {0: "ab" * 32, 1: "cd" * 32, 2: 7, 3: "0x" + "99" * 20}[index]
    anchors[batches[2].batch_id] = tuple(held)  # type: ignore[assignment]
    (found,) = problems(run(docs, batches, anchors))[batches[2].batch_id]
    assert found.startswith(f"anchor {field} differs: chain holds ")


def test_a_broken_chain_names_the_previous_root() -> None:
    docs, batches = history()
    relinked = sign(batches[2].model_copy(update={"prev_root": "ef" * 32, "signature": ""}), KEY)
    anchors = {**chain_of(batches), relinked.batch_id: chain_of([relinked])[relinked.batch_id]}
    found = problems(run(docs, [*batches[:2], relinked, *batches[3:]], anchors))
    assert found == {relinked.batch_id: [
        f"prev_root differs: record has efefefefefef, the partition's previous root "
        f"(batch {batches[1].batch_id}) is {batches[1].root[:12]}"]}


def test_rewritten_audit_record_fails_its_signature_and_leaves() -> None:
    docs, batches = history()
    forged = batches[1].model_copy(update={"root": "cd" * 32})
    found = problems(run(docs, [batches[0], forged, *batches[2:]]))
    assert found[batches[1].batch_id][0] == \
        f"bad signature: it does not recover to its signer {DEV_SIGNER}"
    assert "audit record inconsistent: root or count is not its leaves'" in \
        found[batches[1].batch_id]
    assert f"anchor root differs: chain holds {batches[1].root[:12]}, record has cdcdcdcdcdcd" \
        in found[batches[1].batch_id]
    # A forgery is no link of the chain: the authentic record is missing from it.
    assert found[batches[2].batch_id] == [
        f"prev_root differs: record has {batches[1].root[:12]}, the partition's previous "
        f"root (batch {batches[0].batch_id}) is {batches[0].root[:12]}"]


def test_a_forged_record_with_a_new_id_is_named_and_breaks_nothing_else() -> None:
    docs, batches = history()
    invented = batches[0].model_copy(update={
        "batch_id": f"e1/{TOPIC}/0/5-6", "first_offset": 5, "last_offset": 6,
        "signer": "", "signature": ""})
    found = problems(run(docs, [*batches[:1], invented, *batches[1:]]))
    assert list(found) == [invented.batch_id]  # the real chain and documents are untouched
    assert found[invented.batch_id][0] == "unsigned record"
    assert found[invented.batch_id][-1] == "missing anchor"
    signed_by_stranger = sign(invented, STRANGER_KEY)
    found = problems(run(docs, [*batches, signed_by_stranger]))
    assert found[invented.batch_id][0] == f"unknown signer {signed_by_stranger.signer}"


def test_a_second_record_reusing_an_id_is_a_named_conflict() -> None:
    docs, batches = history()
    rival = sign(batches[4].model_copy(update={"root": "ab" * 32, "doc_count": 2}),
                 STRANGER_KEY)
    found = problems(run(docs, [*batches, rival]))
    assert found == {batches[4].batch_id: [
        "conflicting record for this batch id: differs in doc_count, root, signer; "
        f"unknown signer {rival.signer}"]}
    # Even signed by the real key, a different record for one id is a conflict.
    twin = sign(batches[4].model_copy(update={"entity_counts": {}}), KEY)
    found = problems(run(docs, [twin, *batches]))
    assert found == {batches[4].batch_id: [
        "conflicting record for this batch id: differs in entity_counts"]}


def test_removed_audit_record_breaks_the_chain_and_orphans_its_documents() -> None:
    docs, batches = history()
    report = run(docs, batches[:1] + batches[2:])
    assert list(problems(report)) == [batches[2].batch_id]
    assert problems(report)[batches[2].batch_id][0].startswith("prev_root differs")
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


# Property tests: any number of redeliveries is clean; a mutation among them is named.
DOCS, BATCHES = history()
Redelivery = st.one_of(
    st.tuples(st.just("copy"), st.integers(0, len(DOCS) - 1)),
    st.tuples(st.just("record"), st.integers(0, len(BATCHES) - 1)),
    st.tuples(st.just("cut_short"), st.integers(0, len(DOCS) - 1)),
)


def redelivered(redeliveries: list[tuple[str, int]], spare: frozenset[int] | set[int] = frozenset(),
                ) -> tuple[list[RedactedDocument], list[AuditBatch]]:
    """The clean history plus the redeliveries; docs whose index is in `spare` are never
    copied (a copy of a dropped document would undo the drop)."""
    docs, batches, before = list(DOCS), list(BATCHES), []
    for kind, i in redeliveries:
        if kind == "copy" and i not in spare:
            docs.append(DOCS[i])  # a replay writes the copy later in the topic
        elif kind == "record":
            batches.append(sign(BATCHES[i].model_copy(update={"created_at": 2.0 + i}), KEY))
        elif kind == "cut_short" and i not in spare:
            # A crash before the record: a copy under a batch id never recorded.
            before.append(DOCS[i].model_copy(update={"batch_id": f"e1/{TOPIC}/9/{i}-{i}"}))
    return before + docs, batches


@settings(max_examples=60, deadline=None)
@given(st.lists(Redelivery, max_size=12))
def test_redeliveries_are_never_flagged(redeliveries: list[tuple[str, int]]) -> None:
    docs, batches = redelivered(redeliveries)
    report = run(docs, batches)
    assert report.ok, (problems(report), report.orphans)


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(["changed", "dropped", "inserted", "reordered"]),
       index=st.integers(0, len(DOCS) - 1), redeliveries=st.lists(Redelivery, max_size=8))
def test_every_mutation_is_named_among_redeliveries(
    kind: str, index: int, redeliveries: list[tuple[str, int]],
) -> None:
    target = DOCS[index]
    batch_id = target.batch_id
    spare = {index, index + 1} if kind == "reordered" else {index}
    docs, batches = redelivered(redeliveries, spare)
    at = docs.index(target)
    name = f"{target.doc_id}@v{target.version}"
    if kind == "changed":
        docs[at] = target.model_copy(update={"text": "Mail <EMAIL> later"})
        want = f"changed {name}"
    elif kind == "dropped":
        del docs[at]
        want = f"missing {name}"
    elif kind == "inserted":
        docs.insert(at + 1, target.model_copy(update={"doc_id": "planted"}))
        want = f"inserted planted@v{target.version}"
    else:
        if index % PER_BATCH == PER_BATCH - 1:  # swap with the one before, same batch
            at, index = at - 1, index - 1
            spare.add(index)
            docs, batches = redelivered(redeliveries, spare)
            at = docs.index(DOCS[index])
        docs[at], docs[at + 1] = docs[at + 1], docs[at]
        want = "reordered"
    report = run(docs, batches)
    assert not report.ok
    named = {b.batch_id: b.problems + [f"missing {m}" for m in b.missing]
             for b in report.batches if not b.ok}
    assert want in named[batch_id]
