"""verify over the query batches: a clean history verifies; a dropped, forged or changed
audit, a broken prev_root link and a chain that holds another root are each named."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import SecretStr

from services.audit.queries.verify import verify_queries
from shared.contract.audit_signing import DEV_QUERY_SIGNER, DEV_QUERY_SIGNING_KEY, sign
from shared.contract.query_audit import GENESIS_ROOT, batch_id_for, batch_root
from shared.contract.records import Anchor, QueryAudit

KEY = SecretStr(DEV_QUERY_SIGNING_KEY)
KNOWN = frozenset({DEV_QUERY_SIGNER.lower()})


def audit(n: int) -> QueryAudit:
    return sign(QueryAudit(query_id=f"q{n}", method="Query", principal="",
                           principal_kind="open", scope="*", at=float(n),
                           question_sha256=hashlib.sha256(b"q").hexdigest(), answer_mode="x",
                           shown=("c",), docs=("d@v1",), cited=("c",)), KEY)


def history() -> tuple[list[tuple[int, int, QueryAudit]], list[Anchor], dict[str, Any]]:
    """Partition 1: batches over offsets 0-2 and 3-4; offset 5 not anchored yet."""
    audits = [(1, n, audit(n)) for n in range(6)]
    first, second = [a for _, _, a in audits[:3]], [a for _, _, a in audits[3:5]]
    r1, r2 = batch_root(first), batch_root(second)
    anchors = [Anchor(batch_id=batch_id_for("e", 1, 0, 2), root=r1, tx_hash="0x1",
                      block_number=1, contract="0xC", chain_id=1, anchored_at=0.0,
                      batch_closed_at=0.0, prev_root=GENESIS_ROOT, leaf_count=3,
                      signer=DEV_QUERY_SIGNER),
               Anchor(batch_id=batch_id_for("e", 1, 3, 4), root=r2, tx_hash="0x2",
                      block_number=2, contract="0xC", chain_id=1, anchored_at=0.0,
                      batch_closed_at=0.0, prev_root=r1, leaf_count=2,
                      signer=DEV_QUERY_SIGNER)]
    chain = {a.batch_id: (a.root, a.prev_root, a.leaf_count, DEV_QUERY_SIGNER) for a in anchors}
    return audits, anchors, chain


def problems(audits: Any, anchors: Any, chain: Any) -> dict[str, list[str]]:
    report = verify_queries(audits, anchors, lambda c, b: chain.get(b), KNOWN)
    return {b.batch_id.rsplit("/", 1)[1]: b.problems for b in report.batches}


def test_a_clean_history_verifies_and_names_what_is_not_anchored_yet() -> None:
    audits, anchors, chain = history()
    report = verify_queries(audits, anchors, lambda c, b: chain.get(b), KNOWN)
    assert report.ok and [b.leaves for b in report.batches] == [3, 2]
    assert report.unanchored == ["q5 (partition 1 offset 5)"]


def test_a_dropped_changed_or_forged_audit_fails_its_batch() -> None:
    audits, anchors, chain = history()
    dropped = [a for a in audits if a[1] != 1]
    assert problems(dropped, anchors, chain) == {
        "0-2": ["2 authentic audits at its offsets, 3 anchored"], "3-4": []}
    changed = [(p, o, sign(a.model_copy(update={"cited": ("x",)}), KEY) if o == 4 else a)
               for p, o, a in audits]
    assert problems(changed, anchors, chain)["3-4"] == [
        "its audits on the topic hash to another root"]
    forged = [(p, o, sign(a, SecretStr("0x" + "42" * 32)) if o == 0 else a)
              for p, o, a in audits]
    assert problems(forged, anchors, chain)["0-2"] == [
        "2 authentic audits at its offsets, 3 anchored"]


def test_a_broken_link_or_a_chain_holding_other_values_is_named() -> None:
    audits, anchors, chain = history()
    relinked = [anchors[0], anchors[1].model_copy(update={"prev_root": "ab" * 32})]
    chain_relinked = {**chain, anchors[1].batch_id: (anchors[1].root, "ab" * 32, 2,
                                                     DEV_QUERY_SIGNER)}
    assert problems(audits, relinked, chain_relinked)["3-4"] == [
        "prev_root is the root of no batch before it on its partition's chain"]
    # Two workers racing over offsets 3-4 and 3-5 both link to 0-2: no broken link.
    raced = [*anchors, anchors[1].model_copy(update={
        "batch_id": batch_id_for("e", 1, 3, 5), "leaf_count": 3,
        "root": batch_root([a for _, _, a in audits[3:6]])})]
    chain_raced = {**chain, raced[2].batch_id: (raced[2].root, raced[2].prev_root, 3,
                                                DEV_QUERY_SIGNER)}
    assert problems(audits, raced, chain_raced) == {"0-2": [], "3-4": [], "3-5": []}
    other = {**chain, anchors[0].batch_id: ("cd" * 32, GENESIS_ROOT, 3, DEV_QUERY_SIGNER)}
    assert problems(audits, anchors, other)["0-2"] == [
        "the chain holds another root, prev_root, leaf count or signer"]
    assert problems(audits, anchors, {})["3-4"] == ["not on chain"]
