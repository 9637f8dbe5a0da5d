"""Query batches: roots, inclusion proofs, batch members and the prover's checks."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from services.audit.queries.auditor import Located, best_proof, matching, render, render_list
from shared.contract.audit_signing import DEV_QUERY_SIGNER, DEV_QUERY_SIGNING_KEY, sign
from shared.contract.query_audit import (
    batch_id_for,
    batch_root,
    leaf_bytes,
    members,
    parse_batch_id,
    principal_hash,
    prove,
    runs,
    tip_from,
)
from shared.contract.records import Anchor, QueryAudit

KEY = SecretStr(DEV_QUERY_SIGNING_KEY)
OTHER_KEY = SecretStr("0x" + "42" * 32)


def audit(n: int, cited: tuple[str, ...] = ("c1",), key: SecretStr | None = KEY) -> QueryAudit:
    record = QueryAudit(query_id=f"q{n}", method="Query", principal="", principal_kind="open",
                        scope="*", at=1_700_000_000.0 + n,
                        question_sha256=hashlib.sha256(f"question {n}".encode()).hexdigest(),
                        answer_mode="extractive", shown=("c1", "c2"),
                        docs=("d1@v1", "d2@v3"), cited=cited)
    return record if key is None else sign(record, key)


def h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def test_the_root_is_rfc6962_over_the_whole_signed_records() -> None:
    a, b, c = audit(1), audit(2), audit(3)
    la, lb, lc = (h(b"\x00" + leaf_bytes(x)) for x in (a, b, c))
    assert batch_root([a]) == la.hex()
    assert batch_root([a, b, c]) == h(b"\x01" + h(b"\x01" + la + lb) + lc).hex()
    # The signature is part of the leaf: a record re-signed by another key is another leaf.
    assert batch_root([sign(a, OTHER_KEY)]) != batch_root([a])


def test_batch_ids_name_the_partition_and_offsets_and_never_a_document_batch() -> None:
    name = parse_batch_id(batch_id_for("e1", 3, 10, 14))
    assert (name.epoch, name.partition, name.first, name.last) == ("e1", 3, 10, 14)  # type: ignore[union-attr]
    assert parse_batch_id("e1/docs.normalized.v1/3/10-14") is None
    assert parse_batch_id("e1/audit.queries.v1/x/10-14") is None


def test_members_are_the_records_in_range_the_signer_signed_in_offset_order() -> None:
    forged = audit(9, key=None).model_copy(update={"signer": DEV_QUERY_SIGNER,
                                                   "signature": "0x" + "00" * 65})
    tampered = audit(8).model_copy(update={"cited": ("c2",)})  # signature no longer holds
    records = [(12, audit(2)), (10, audit(0)), (11, forged), (13, sign(audit(3), OTHER_KEY)),
               (14, tampered), (15, audit(5)), (16, audit(6))]
    got = members(records, 10, 15, DEV_QUERY_SIGNER)
    assert [(o, a.query_id) for o, a in got] == [(10, "q0"), (12, "q2"), (15, "q5")]


def test_a_chain_end_is_the_partitions_query_batch_with_the_last_offset() -> None:
    table = [(batch_id_for("e1", 2, 0, 9), {"root": "aa"}),
             (batch_id_for("e1", 2, 10, 14), {"root": "bb"}),
             (batch_id_for("e1", 3, 15, 30), {"root": "cc"}),
             ("e1/docs.normalized.v1/2/40-50", {"root": "dd"})]
    tip = tip_from(table, 2)
    assert tip is not None and (tip.epoch, tip.root, tip.last_offset) == ("e1", "bb", 14)
    assert tip_from(table, 1) is None


def test_runs_cut_where_the_signer_changes() -> None:
    items = [(0, audit(0)), (1, audit(1)), (2, sign(audit(2), OTHER_KEY)), (3, audit(3))]
    assert [[o for o, _ in run] for run in runs(items)] == [[0, 1], [2], [3]]


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 24), data=st.data())
def test_every_leaf_of_a_random_batch_proves_and_a_changed_record_does_not(
        size: int, data: st.DataObject) -> None:
    leaves = [audit(n, cited=(f"c{n}",), key=None) for n in range(size)]
    i = data.draw(st.integers(0, size - 1))
    proof = prove(leaves, i)
    assert proof.root == batch_root(leaves) and proof.size == size
    assert proof.holds_for(leaves[i])
    changed = leaves[i].model_copy(update=data.draw(st.sampled_from([
        {"cited": ("forged",)}, {"question_sha256": "0" * 64}, {"principal": "x"},
        {"shown": ()}, {"at": 0.0}])))
    assert not proof.holds_for(changed)
    if size > 1:
        j = data.draw(st.integers(0, size - 1).filter(lambda j: j != i))
        assert not proof.holds_for(leaves[j])


# The prover's checks, with the chain read from a dict.
EPOCH, PART = "ep", 1


def scene() -> tuple[list[Located], list[Anchor], dict[tuple[str, str], Any]]:
    records = [audit(0), audit(1), audit(2)]
    located = [Located(PART, 10 + i, r) for i, r in enumerate(records)]
    batch_id = batch_id_for(EPOCH, PART, 10, 12)
    root = batch_root(records)
    anchor = Anchor(batch_id=batch_id, root=root, tx_hash="0xab", block_number=7,
                    contract="0xC0", chain_id=31337, anchored_at=1.0, batch_closed_at=1.0,
                    prev_root="00" * 32, leaf_count=3, signer=DEV_QUERY_SIGNER)
    chain = {("0xC0", batch_id): (root, "00" * 32, 3, DEV_QUERY_SIGNER)}
    return located, [anchor], chain


KNOWN = frozenset({DEV_QUERY_SIGNER.lower()})


def test_an_anchored_record_proves_with_every_check() -> None:
    located, anchors, chain = scene()
    proof = best_proof("q1", located, anchors, lambda c, b: chain.get((c, b)), KNOWN)
    assert proof is not None
    assert all(proof["checks"].values()), proof["checks"]
    assert (proof["leaf_index"], proof["tree_size"], proof["tx_hash"]) == (1, 3, "0xab")
    assert proof["record"]["cited"] == ["c1"]
    assert "proof ok" in render(proof)


def test_a_forged_copy_of_a_query_id_never_passes_and_never_hides_the_real_one() -> None:
    located, anchors, chain = scene()
    forged = audit(1, cited=("secret-doc-chunk",), key=OTHER_KEY)
    located.append(Located(PART, 13, forged))  # after the batch: never anchored
    read = lambda c, b: chain.get((c, b))  # noqa: E731
    proof = best_proof("q1", located, anchors, read, KNOWN)
    assert proof is not None and proof["record"]["cited"] == ["c1"] and proof["copies"] == 2
    only_forged = [loc for loc in located if loc.offset != 11]
    failed = best_proof("q1", only_forged, anchors, read, KNOWN)
    assert failed is not None
    assert failed["checks"]["signed_by_known_signer"] is False
    assert failed["checks"]["anchored"] is False
    assert "FAILED" in render(failed)


def test_a_record_tampered_inside_an_anchored_range_fails_its_proof() -> None:
    located, anchors, chain = scene()
    tampered = located[1].audit.model_copy(update={"cited": ("other",)})
    located[1] = Located(PART, 11, tampered)
    proof = best_proof("q1", located, anchors, lambda c, b: chain.get((c, b)), KNOWN)
    assert proof is not None
    checks = proof["checks"]
    assert (checks["signed_by_known_signer"], checks["proof_holds"],
            checks["leaf_count_matches"]) == (False, False, False)


def test_a_chain_that_holds_another_root_fails_the_anchor_check() -> None:
    located, anchors, chain = scene()
    key = next(iter(chain))
    chain[key] = ("ee" * 32, *chain[key][1:])
    proof = best_proof("q2", located, anchors, lambda c, b: chain.get((c, b)), KNOWN)
    assert proof is not None and proof["checks"]["proof_holds"] is True
    assert proof["checks"]["anchor_on_chain_matches"] is False
    assert best_proof("nope", located, anchors, lambda c, b: None, KNOWN) is None


def test_an_auditor_finds_a_callers_audits_by_its_subjects_hash_or_a_question() -> None:
    key = SecretStr("auditor-key")
    alice, bob = principal_hash("alice@example.com", key), principal_hash("bob@x.org", key)
    audits = [Located(0, n, audit(n).model_copy(update={"principal": who}))
              for n, who in enumerate([alice, bob, alice, ""])]
    assert [f.offset for f in matching(audits, principal=alice)] == [0, 2]
    assert [f.offset for f in matching(audits, question="question 1")] == [1]
    assert [f.offset for f in matching(audits, alice, "question 2")] == [2]
    assert matching(audits, principal_hash("alice@example.com", SecretStr("other"))) == []
    listing = render_list(matching(audits, principal=alice))
    assert "q0" in listing and "q2" in listing and "q1" not in listing
    assert "alice" not in listing and render_list([]) == "no query audit matches"
