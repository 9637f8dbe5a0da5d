"""RFC 6962 hashing against the published test vectors, and the audit batch built on it."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from shared.contract import merkle
from shared.contract.audit_batches import (
    GENESIS_ROOT,
    Tip,
    batch_root,
    build_batch,
    leaf_for,
    tips_from,
)
from shared.contract.audit_signing import DEV_SIGNER, DEV_SIGNING_KEY, sign
from shared.contract.records import Document, RedactedDocument
from tests.unit.redaction.rfc6962 import INPUTS, ROOTS


@pytest.mark.parametrize("n", range(1, 9))
def test_rfc6962_vectors(n: int) -> None:
    assert merkle.root([merkle.leaf_hash(x) for x in INPUTS[:n]]).hex() == ROOTS[n - 1]


def test_empty_tree_is_hash_of_nothing() -> None:
    assert merkle.root([]).hex() == \
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def _pair(i: int, text: str) -> tuple[Document, RedactedDocument]:
    raw = Document(doc_id=f"d{i}", version=1, text=text, source="s", event_time=0,
                   ingest_time=0)
    red = RedactedDocument(**raw.model_dump(exclude={"text"}), text="<PERSON> said hi",
                           entity_counts={"PERSON": 1})
    return raw, red


def test_batch_root_changes_with_any_leaf_change_or_order() -> None:
    pairs = [_pair(i, f"Alice {i} said hi") for i in range(3)]
    leaves = [leaf_for(raw, red, 10 + i) for i, (raw, red) in enumerate(pairs)]
    root = batch_root(leaves)
    assert batch_root(leaves[::-1]) != root
    assert batch_root(leaves[:2]) != root
    changed = leaves[1].model_copy(update={"raw_sha256": "0" * 64})
    assert batch_root([leaves[0], changed, leaves[2]]) != root
    # The raw text hash differs from the redacted one: the leaf proves redaction happened.
    assert leaves[0].raw_sha256 != leaves[0].redacted_sha256


def test_batch_record_fields_and_chain() -> None:
    pairs = [_pair(i, f"Alice {i}") for i in range(2)]
    leaves = [leaf_for(raw, red, 5 + i) for i, (raw, red) in enumerate(pairs)]
    # Offsets 4-7 consumed: 4 and 7 were dead-lettered, yet the batch covers them.
    first = build_batch("docs.normalized.v1", 2, (4, 7), leaves, [r for _, r in pairs],
                        Tip.genesis("e1"), "fp", 1.0)
    assert first.batch_id == "e1/docs.normalized.v1/2/4-7" and first.doc_count == 2
    assert (first.first_offset, first.last_offset, first.epoch) == (4, 7, "e1")
    assert first.entity_counts == {"PERSON": 2} and first.prev_root == GENESIS_ROOT
    second = build_batch("docs.normalized.v1", 2, (8, 9), leaves, [],
                         Tip("e1", first.root, 7), "fp", 2.0)
    assert second.prev_root == first.root and second.batch_id == "e1/docs.normalized.v1/2/8-9"


def test_chain_ends_come_from_records_our_key_signed_only() -> None:
    pairs = [_pair(i, f"Alice {i}") for i in range(2)]
    leaves = [leaf_for(raw, red, i) for i, (raw, red) in enumerate(pairs)]
    first = sign(build_batch("t", 0, (0, 1), leaves, [], Tip.genesis("e1"), "fp", 1.0),
                 SecretStr(DEV_SIGNING_KEY))
    second = sign(build_batch("t", 0, (2, 3), leaves, [], Tip("e1", first.root, 1), "fp", 2.0),
                  SecretStr(DEV_SIGNING_KEY))
    other_partition = sign(build_batch("t", 3, (0, 9), leaves, [], Tip.genesis("e2"), "fp", 1.0),
                           SecretStr(DEV_SIGNING_KEY))
    forged_far = second.model_copy(update={"last_offset": 10**9, "root": "ab" * 32})
    stranger = sign(forged_far, SecretStr("0x" + "11" * 32))
    tips = tips_from([first, second, forged_far, stranger, other_partition], DEV_SIGNER)
    assert tips == {0: Tip("e1", second.root, 3), 3: Tip("e2", other_partition.root, 9)}
    assert Tip.genesis().epoch != Tip.genesis().epoch  # a fresh chain gets a fresh epoch
