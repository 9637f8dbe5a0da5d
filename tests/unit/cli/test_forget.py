"""`streamrag forget` calls a forget done only when its receipt is anchored and redaction
has committed past the receipt's batch (the keys go between the two)."""

from __future__ import annotations

from services.cli.forget import Pending, as_json, batch_end
from shared.contract.audit_batches import batch_id_for
from shared.contract.records import Anchor, RedactedDocument


def test_the_batch_id_names_the_partition_and_last_offset_it_consumed() -> None:
    assert batch_end(batch_id_for("a1b2c3", "docs.normalized.v1", 3, 17, 42)) == (3, 42)
    assert batch_end(batch_id_for("e", "docs.normalized.v1", 0, 0, 0)) == (0, 0)


def test_anchored_is_not_done_until_carried_out() -> None:
    receipt = RedactedDocument(doc_id="d", version=2, op="delete", source="s", event_time=0,
                               ingest_time=0, batch_id=batch_id_for("e", "t", 1, 5, 9))
    anchor = Anchor(batch_id=receipt.batch_id, root="00" * 32, tx_hash="0x" + "ab" * 32,
                    block_number=7, chain_id=1, contract="0x" + "00" * 20, anchored_at=1.0,
                    batch_closed_at=0.5)
    p = Pending("d", "r-0", receipt=receipt, anchor=anchor)
    assert not p.done and as_json([p])[0]["done"] is False
    p.carried_out = True
    assert p.done and as_json([p])[0]["done"] is True
    assert not Pending("d", "r-1", receipt=receipt, carried_out=True).done  # not anchored
