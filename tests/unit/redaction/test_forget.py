"""Redaction seals each version under its data key, keys its leaf, and carries out a forget:
the keys of every earlier version destroyed, the delete made a receipt, a replay of a
forgotten version dead-lettered."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from shared.contract import forget
from shared.contract.audit_batches import content_sha256, raw_mac
from shared.contract.codec import decode
from shared.contract.records import AuditBatch, Document, RedactedDocument
from shared.contract.sealed import Forgotten, open_document
from shared.keys.sealing import key_id_for
from shared.keys.store import Destroyed, VersionKey
from tests.unit.redaction.test_agents import _drive, stage


def upsert(doc_id: str, version: int, text: str) -> bytes:
    return Document(doc_id=doc_id, version=version, text=text, title="T", source="t",
                    event_time=0, ingest_time=0).model_dump_json().encode()


def forget_request(doc_id: str, version: int, request: str) -> bytes:
    return Document(doc_id=doc_id, version=version, op="delete", source="t", event_time=0,
                    ingest_time=0, metadata=forget.request_marker(request, "dpo@example.org"),
                    ).model_dump_json().encode()


def test_a_sealed_version_keys_its_leaf_so_a_guess_of_the_text_confirms_nothing() -> None:
    red, audit, _ = asyncio.run(_drive([upsert("leaf-a", 1, "call alpha at noon")]))
    (batch_call,) = audit.await_args_list
    (leaf,) = decode(AuditBatch, batch_call.kwargs["value"]).leaves
    key = stage.keys.get("leaf-a", 1)
    assert isinstance(key, VersionKey) and leaf.key_id == key.key_id == key_id_for("leaf-a", 1)
    guess = content_sha256("T", "call alpha at noon", {})
    assert leaf.raw_sha256 != guess  # the plain hash of the right guess is not in the leaf
    raw = Document.model_validate_json(upsert("leaf-a", 1, "call alpha at noon"))
    assert leaf.raw_sha256 == raw_mac(raw, key)  # the key holder recomputes it
    sealed = RedactedDocument.model_validate_json(red.await_args_list[0].kwargs["value"])
    assert sealed.sealed and sealed.key_id == key.key_id and leaf.redacted_sha256 == \
        hashlib.sha256(json.dumps(["sealed", key.key_id, sealed.sealed, []]).encode()).hexdigest()


def test_the_same_version_seals_alike_in_a_replay() -> None:
    one, _, _ = asyncio.run(_drive([upsert("same", 1, "alpha beta")]))
    two, _, _ = asyncio.run(_drive([upsert("same", 1, "alpha beta")]))
    first, again = (RedactedDocument.model_validate_json(m.await_args_list[0].kwargs["value"])
                    for m in (one, two))
    assert first.sealed and first.model_copy(update={"batch_id": ""}) == \
        again.model_copy(update={"batch_id": ""})


def test_a_forget_destroys_every_earlier_key_and_writes_a_receipt() -> None:
    red, audit, dead = asyncio.run(_drive([upsert("gone", 1, "alpha"),
                                           upsert("gone", 2, "beta"),
                                           upsert("kept", 1, "gamma")]))
    sealed = [RedactedDocument.model_validate_json(c.kwargs["value"])
              for c in red.await_args_list]
    red, audit, dead = asyncio.run(_drive([forget_request("gone", 3, "req-1")]))
    (receipt_call,) = red.await_args_list
    receipt = RedactedDocument.model_validate_json(receipt_call.kwargs["value"])
    assert receipt.op == "delete" and forget.is_forget(receipt)
    got = forget.read_receipt(receipt.metadata)
    assert got["request_id"] == "req-1" and got["requested_by"] == "dpo@example.org"
    assert got["versions"] == [1, 2]
    assert got["keys_destroyed"] == sorted([key_id_for("gone", 1), key_id_for("gone", 2)])
    assert isinstance(got["raw_expires_by"], float) and got["raw_expires_by"] > got["at"]
    for version in (1, 2):
        assert isinstance(stage.keys.get("gone", version), Destroyed)
    with pytest.raises(Forgotten):
        open_document(sealed[0], stage.keys)
    assert open_document(sealed[2], stage.keys).text == "GAMMA"  # another document's stays
    (batch_call,) = audit.await_args_list
    (leaf,) = decode(AuditBatch, batch_call.kwargs["value"]).leaves
    assert (leaf.doc_id, leaf.version) == ("gone", 3)  # the receipt is an audited leaf
    assert not dead.await_args_list


def test_a_replayed_version_of_a_forgotten_document_is_dead_lettered_not_resealed() -> None:
    asyncio.run(_drive([upsert("again", 1, "alpha")]))
    asyncio.run(_drive([forget_request("again", 2, "req-2")]))
    red, audit, dead = asyncio.run(_drive([upsert("again", 1, "alpha"),
                                           upsert("other", 1, "delta")]))
    assert [RedactedDocument.model_validate_json(c.kwargs["value"]).doc_id
            for c in red.await_args_list] == ["other"]
    (letter,) = [json.loads(c.kwargs["value"]) for c in dead.await_args_list]
    assert letter["reason"] == "forgotten" and "alpha" not in json.dumps(letter)
    assert isinstance(stage.keys.get("again", 1), Destroyed)  # no new key was made
