"""Pure encodings: batch ids and hex roots to bytes32, receipts to Anchor records."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.ledger.anchors import ZERO, AnchorReceipt, batch_key, hex32
from shared.errors import InvalidInput


@given(st.binary(min_size=32, max_size=32), st.booleans(), st.booleans())
def test_hex32_reads_any_32_bytes_in_either_spelling(raw: bytes, prefix: bool, upper: bool) -> None:
    text = raw.hex().upper() if upper else raw.hex()
    assert hex32(("0x" if prefix else "") + text, "root") == raw


@pytest.mark.parametrize("empty", ["", "0x"])
def test_an_empty_root_is_the_zero_root(empty: str) -> None:
    assert hex32(empty, "prev_root") == ZERO


@pytest.mark.parametrize(("value", "reason"), [
    ("zz" * 32, "not_hex"), ("abc", "not_hex"), ("ab" * 31, "not_32_bytes"),
    ("ab" * 33, "not_32_bytes"),
])
def test_hex32_refuses_bad_roots_naming_the_field(value: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        hex32(value, "prev_root")
    assert (info.value.reason, info.value.field) == (reason, "prev_root")


@given(st.text(max_size=200))
def test_batch_key_is_the_sha256_of_the_id(batch_id: str) -> None:
    assert batch_key(batch_id) == hashlib.sha256(batch_id.encode("utf-8")).digest()


def test_batch_keys_differ_for_different_ids() -> None:
    assert batch_key("docs.normalized.v1/0/0-9") != batch_key("docs.normalized.v1/1/0-9")


def test_receipt_becomes_the_anchor_record_with_the_batch_close_time() -> None:
    receipt = AnchorReceipt("b/0/0-1", "ab" * 32, "00" * 32, 2, "0x" + "12" * 32,
                            7, "0x" + "34" * 20, 31337, 1_000.5)
    record = receipt.record(batch_closed_at=998.0)
    assert (record.batch_id, record.root, record.tx_hash) == (receipt.batch_id, receipt.root,
                                                              receipt.tx_hash)
    assert (record.block_number, record.contract, record.chain_id) == (7, "0x" + "34" * 20, 31337)
    assert (record.anchored_at, record.batch_closed_at) == (1_000.5, 998.0)
