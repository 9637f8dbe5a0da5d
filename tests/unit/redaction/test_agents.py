"""The redaction agent under Faust's test context, with a stand-in for Presidio."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
from pathlib import Path
from typing import Any
from unittest.mock import AsyncMock, patch

import pytest
from pydantic import SecretStr

from services.redaction import agents
from services.redaction.subjects import Masked, Redacted
from shared.batching import current_event
from shared.contract import forget
from shared.contract.audit_batches import GENESIS_ROOT, Tip, build_batch, content_sha256, raw_mac
from shared.contract.audit_signing import DEV_SIGNER, DEV_SIGNING_KEY, check, sign
from shared.contract.codec import decode, encode
from shared.contract.records import (
    AuditBatch,
    AuditLeaf,
    Document,
    RedactedDocument,
    SubjectIndex,
)
from shared.contract.sealed import Forgotten, open_document
from shared.contract.subjects import DEV_SUBJECT_KEY, key_id
from shared.errors import InfrastructureError, InvalidInput
from shared.keys.sealing import key_id_for
from shared.keys.store import Destroyed, VersionKey
from shared.worker.boundary import EXIT_FATAL
from tests.support import built
from tests.support.polling import eventually_async

stage = built.stage("redaction")
app, audit_topic, dlq, redacted_topic = stage.app, stage.audit_topic, stage.dlq, \
    stage.redacted_topic


def fresh_chains() -> agents.Chains:
    """The chain ends of a worker that just started."""
    return agents.Chains(stage.kafka, stage.signer)


class FakeRedactor:
    """Fails on documents whose text says so; otherwise masks the words with an @ as
    EMAIL_ADDRESS and those that start with + as PHONE_NUMBER (`_` joins a number's
    parts), and upper-cases the rest."""

    fingerprint = "f" * 64

    def redact_found(self, docs: list[Document]) -> list[Redacted | Exception]:
        return [ValueError(f"analyzer broke on {d.text}") if "boom" in d.text else
                InvalidInput("pii_in_acl", "acl", "a label holds PHONE_NUMBER")
                if any(label.startswith("tel:") for label in d.acl) else self._masked(d)
                for d in docs]

    @staticmethod
    def _masked(d: Document) -> Redacted:
        masked, words = [], []
        for word in d.text.split(" "):
            entity = "EMAIL_ADDRESS" if "@" in word else \
                "PHONE_NUMBER" if word.startswith("+") else None
            if entity:
                masked.append(Masked(entity, word.replace("_", " ")))
            words.append(f"<{entity}>" if entity else word.upper())
        return Redacted(RedactedDocument(**d.model_dump(exclude={"text"}),
                                         text=" ".join(words)), tuple(masked))


def doc(i: int, text: str, acl: tuple[str, ...] = ()) -> bytes:
    return Document(doc_id=f"d{i}", version=1, text=text, source="t", event_time=0,
                    ingest_time=0, acl=acl).model_dump_json().encode()


async def _delivered(**_: object) -> asyncio.Future[None]:
    """What topic.send gives back: a future the broker's acknowledgement resolves."""
    future = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


class Record:
    def __init__(self, value: bytes) -> None:
        self.value = value


async def _drive(values: list[bytes], audit_history: list[AuditBatch] | None = None,
                 subjects: AsyncMock | None = None, on: Any = stage,
                 order: list[str] | None = None) -> tuple[AsyncMock, AsyncMock, AsyncMock]:
    """Put `values` to the stage's agent; the sends to docs.redacted.v1, audit.batches.v1
    and deadletter.v1 (and to pii.subjects.v1 on `subjects`), each topic's name appended
    to `order` as it is sent to."""
    app, redacted_topic, audit_topic, dlq = on.app, on.redacted_topic, on.audit_topic, on.dlq
    app.finalize()
    app.flow_control.resume()

    def sender(topic: Any) -> AsyncMock:
        async def send(**kwargs: object) -> asyncio.Future[None]:
            if order is not None:
                order.append(topic.get_topic_name())
            return await _delivered(**kwargs)
        return AsyncMock(side_effect=send)
    red, audit, dead = sender(redacted_topic), sender(audit_topic), sender(dlq)
    indexed = subjects or sender(on.subjects_topic)

    async def read_back(*_: object) -> list[Record]:
        return [Record(encode(b)) for b in audit_history or []]
    with patch.object(redacted_topic, "send", red), patch.object(audit_topic, "send", audit), \
            patch.object(dlq, "send", dead), patch.object(on, "redactor", FakeRedactor()), \
            patch.object(on.subjects_topic, "send", indexed), \
            patch.object(agents, "read_back", read_back), \
            patch.object(agents.membership, "confirm", AsyncMock(return_value=None)), \
            patch.object(on, "chains", agents.Chains(on.kafka, on.signer)):  # a fresh worker
        async with on.redact.test_context() as agent:
            for value in values:
                await agent.put(value=value, key=None)
            # The micro-batch closes after batch_within_s; its audit record comes last of
            # its records, and then its forgets' keys go and the chain end moves.
            await eventually_async(lambda: audit.await_count, "the micro-batch's audit record")
            batch = decode(AuditBatch, audit.await_args_list[-1].kwargs["value"])
            await eventually_async(
                lambda: (tip := on.chains.tips.get(batch.partition)) is not None
                and tip.root == batch.root, "the micro-batch to finish")
    return red, audit, dead


def test_a_failing_document_is_dead_lettered_alone_and_the_batch_is_audited() -> None:
    red, audit, dead = asyncio.run(_drive([doc(1, "alpha"), doc(2, "boom secret text"),
                                           b"{not json", doc(3, "gamma")]))
    sent = [json.loads(c.kwargs["value"]) for c in red.await_args_list]
    # Sealed on the topic: the text is neither there nor in the metadata, only under its key.
    assert [(d["doc_id"], d["text"], d["title"]) for d in sent] == [("d1", "", ""),
                                                                    ("d3", "", "")]
    assert not any("ALPHA" in c.kwargs["value"].decode() for c in red.await_args_list)
    opened = [open_document(RedactedDocument.model_validate(d), stage.keys) for d in sent]
    assert [(d.doc_id, d.text) for d in opened] == [("d1", "ALPHA"), ("d3", "GAMMA")]
    assert all(c.kwargs["force"] for c in red.await_args_list + audit.await_args_list)
    letters = [json.loads(c.kwargs["value"]) for c in dead.await_args_list]
    assert sorted(x["reason"] for x in letters) == ["malformed_json", "redaction_failed"]
    failed = next(x for x in letters if x["reason"] == "redaction_failed")
    assert failed["detail"] == "ValueError" and failed["payload_b64"] is None
    assert "boom" not in json.dumps(letters)
    (call,) = audit.await_args_list
    batch = decode(AuditBatch, call.kwargs["value"])
    assert [leaf.doc_id for leaf in batch.leaves] == ["d1", "d3"]
    assert all(d["batch_id"] == batch.batch_id for d in sent)
    # The batch covers all four offsets it consumed, the dead-lettered ones too.
    assert batch.batch_id == f"{batch.epoch}/docs.normalized.v1/0/0-3" and batch.doc_count == 2
    assert batch.prev_root == GENESIS_ROOT and len(batch.epoch) == 12
    assert check(batch, frozenset({DEV_SIGNER.lower()})) is None


def test_refused_labels_are_dead_lettered_with_their_reason_and_never_quoted() -> None:
    red, audit, dead = asyncio.run(_drive([doc(1, "alpha", ("payments",)),
                                           doc(2, "beta", ("eng", "tel:5551234567"))]))
    sent = [json.loads(c.kwargs["value"]) for c in red.await_args_list]
    assert [(d["doc_id"], d["acl"]) for d in sent] == [("d1", ["payments"])]
    (letter,) = [json.loads(c.kwargs["value"]) for c in dead.await_args_list]
    assert (letter["reason"], letter["field"], letter["stage"]) == ("pii_in_acl", "acl",
                                                                   "redaction")
    assert letter["payload_b64"] is None and "5551234567" not in json.dumps(letter)
    (call,) = audit.await_args_list
    batch = decode(AuditBatch, call.kwargs["value"])
    assert [leaf.doc_id for leaf in batch.leaves] == ["d1"] and batch.last_offset == 1


def test_offsets_an_audit_record_covers_are_skipped_and_the_chain_goes_on() -> None:
    """After a crash, the replayed offsets that made it into a record form no new batch."""
    leaf = AuditLeaf(doc_id="d0", version=1, offset=1, redacted_sha256="0" * 64,
                     raw_sha256="1" * 64)
    earlier = sign(build_batch("docs.normalized.v1", 0, (0, 1), [leaf], [], Tip.genesis("ep"),
                               "fp", 1.0), SecretStr(DEV_SIGNING_KEY))
    forged = earlier.model_copy(update={"last_offset": 3, "root": "ab" * 32})
    red, audit, _ = asyncio.run(_drive([doc(i, f"text {i}") for i in range(4)],
                                       [earlier, forged]))
    assert [json.loads(c.kwargs["value"])["doc_id"] for c in red.await_args_list] == ["d2", "d3"]
    (call,) = audit.await_args_list
    batch = decode(AuditBatch, call.kwargs["value"])
    assert batch.batch_id == "ep/docs.normalized.v1/0/2-3"
    assert batch.prev_root == earlier.root  # the forged record moved nothing


def test_a_broker_failure_mid_batch_leaves_the_batch_not_done_and_ends_the_worker() -> None:
    """A graceful stop used to commit the batch's offsets with its outputs half sent; now the
    failure leaves the agent with the batch not done, and the worker exits to replay it."""
    exits: list[int] = []

    async def broker_gone(**_: object) -> None:
        raise ConnectionError("broker unreachable")

    def fake_exit(code: int) -> None:
        exits.append(code)  # the real one never returns; this one lets the test end

    async def go() -> tuple[bool, int]:
        app.finalize()
        app.flow_control.resume()

        async def read_back(*_: object) -> list[Record]:
            return []
        with patch.object(redacted_topic, "send", AsyncMock(side_effect=broker_gone)), \
                patch.object(audit_topic, "send", AsyncMock(side_effect=_delivered)) as audit, \
                patch.object(stage, "redactor", FakeRedactor()), \
                patch.object(agents, "read_back", read_back), \
                patch.object(stage, "chains", fresh_chains()), \
                patch.object(agents.membership, "confirm", AsyncMock(return_value=None)), \
                patch.object(logging, "shutdown", lambda: None), \
                patch.object(os, "_exit", fake_exit):
            # The app's own agent-error handler, as every agent of a worker has it.
            async with stage.redact.test_context(on_error=app._on_agent_error) as agent:
                event = await agent.put(value=doc(1, "alpha"), key=None, wait=False)
                await eventually_async(lambda: exits, "the worker to exit")
            return event.message.acked, audit.await_count
    acked, audits = asyncio.run(go())
    assert exits == [EXIT_FATAL]
    assert audits == 0  # no record for a batch whose documents failed
    assert acked is False  # not done: nothing of it can be committed


def test_a_stop_while_the_analyzer_loads_acks_no_batch() -> None:
    """A batch taken while the redactor loaded was acked by the stop that
    cancelled the agent there (outside its own error handling), with nothing sent, and the
    crashed worker's stop committed it."""
    async def go() -> tuple[list[bool], int]:
        app.finalize()
        app.flow_control.resume()
        sent = AsyncMock(side_effect=_delivered)
        with patch.object(redacted_topic, "send", sent), patch.object(stage, "redactor", None):
            async with stage.redact.test_context() as agent:
                events = [await agent.put(value=doc(i, "alpha"), key=None, wait=False)
                          for i in range(3)]
                await asyncio.sleep(stage.settings.batch_within_s + 0.5)  # a batch's time
            # Leaving the context stops the agent as a worker's stop does: its stream first,
            # then the actor.
        return [e.message.acked for e in events], sent.await_count
    acked, sent = asyncio.run(go())
    assert sent == 0
    assert not any(acked), "the batch was done though nothing was sent"


class Stream:
    def __init__(self) -> None:
        self.current_event: object = "next message"

    def _set_current_event(self, event: object) -> None:
        self.current_event = event


def test_table_writes_borrow_the_current_event_and_give_it_back() -> None:
    """The stream's current event is the next message's once the block ends: a table write
    after it must not land on an old event's partition."""
    stream = Stream()
    with current_event(stream, "batch event"):
        assert stream.current_event == "batch event"
    assert stream.current_event == "next message"


def test_a_partition_revoked_and_given_back_at_the_same_offset_reloads_its_chain_end() -> None:
    """Another worker may have audited the partition further and died before committing:
    the chain end this worker remembers is stale even though the offsets line up."""
    elsewhere = sign(build_batch("docs.normalized.v1", 0, (5, 9), [], [], Tip.genesis("ep"),
                                 "fp", 1.0), SecretStr(DEV_SIGNING_KEY))
    history: list[AuditBatch] = []
    reads: list[int] = []

    async def read_back(*_: object) -> list[Record]:
        reads.append(1)
        return [Record(encode(b)) for b in history]

    async def go() -> tuple[int, int]:
        chains = fresh_chains()
        with patch.object(agents, "read_back", read_back):
            await chains.tip(0, 0)  # a fresh worker loads once
            chains.saw(0, 4)
            assert (await chains.tip(0, 5)).last_offset == -1 and len(reads) == 1  # continuous
            history.append(elsewhere)  # meanwhile another worker audited 5-9, died uncommitted
            chains.forget({0})  # the partition went away, then came back at offset 5
            tip = await chains.tip(0, 5)
        return len(reads), tip.last_offset

    assert asyncio.run(go()) == (2, 9)  # reloaded: 5-9 are skipped, not audited twice


def test_a_partition_loaded_but_never_owned_reloads_when_a_rebalance_hands_it_over() -> None:
    """A reload marks every partition fresh; a partition this worker never processed kept
    that mark through rebalances, and was taken over later with an end long since stale."""
    history: list[AuditBatch] = []
    reads: list[int] = []

    async def read_back(*_: object) -> list[Record]:
        reads.append(1)
        return [Record(encode(b)) for b in history]

    async def go() -> int:
        chains = fresh_chains()
        with patch.object(agents, "read_back", read_back):
            await chains.tip(1, 0)  # start: every partition's end loaded (all genesis)
            chains.saw(1, 3)  # this worker owns partition 1 only
            history.append(sign(build_batch("docs.normalized.v1", 0, (0, 8), [], [],
                                            Tip.genesis("ep"), "fp", 1.0),
                                SecretStr(DEV_SIGNING_KEY)))  # another worker, partition 0
            chains.forget({1})  # a rebalance: partition 1 revoked, partition 0 handed over
            return (await chains.tip(0, 9)).last_offset

    assert asyncio.run(go()) == 8 and len(reads) == 2


def test_an_unconfirmed_worker_stops_if_its_chain_end_moved_and_goes_on_if_not() -> None:
    """Woken past its session timeout: if the partition's new owner audited it already (the
    chain end moved), nothing more is written and the batch is not done (it replays there);
    if nobody did (a lone worker whose heartbeats a stall starved), the batch goes on."""
    evicted = AsyncMock(return_value="UnknownMemberIdError")
    first = sign(build_batch("docs.normalized.v1", 3, (0, 20), [], [], Tip.genesis("ep"),
                             "f" * 64), SecretStr(DEV_SIGNING_KEY))
    ours = agents.tips_from([first], stage.signer)[3]  # the chain end this batch extends
    theirs = sign(build_batch("docs.normalized.v1", 3, (21, 22), [], [], ours, "f" * 64),
                  SecretStr(DEV_SIGNING_KEY))

    async def run(history: list[AuditBatch]) -> None:
        async def read_back(_kafka: object, _topic: object, enough: object) -> list[Record]:
            return [Record(encode(b)) for b in history]
        with patch.object(agents.membership, "confirm", evicted), \
                patch.object(agents, "read_back", read_back):
            await stage._still_owned(3, ours)
    asyncio.run(run([first]))  # nobody audited partition 3 past our end: it goes on
    with pytest.raises(agents.LostPartition, match="partition 3"):
        asyncio.run(run([first, theirs]))  # the new owner did: stop, write nothing
    assert issubclass(agents.LostPartition, InfrastructureError)  # the worker stops


def _hmac(key: bytes, kind: str, form: str) -> str:
    """The key of a value, computed here without the code under test."""
    return hmac.new(key, f"{kind}\x00{form}".encode(), hashlib.sha256).hexdigest()


def test_each_redacted_version_is_indexed_by_keyed_subjects_before_its_batch_is_audited(
        tmp_path: Path) -> None:
    own = built.stage("redaction", data_dir=tmp_path, subject_key=SecretStr("k-test"))
    order: list[str] = []
    subjects = AsyncMock(side_effect=lambda **kw: (order.append("pii.subjects.v1"),
                                                   _delivered(**kw))[1])
    _, audit, _ = asyncio.run(_drive(
        [doc(1, "write to Ann.Lee@Example.COM or call +1_(415)_555-0132 today"),
         doc(2, "nobody here"), doc(3, "boom Ann.Lee@Example.COM")], subjects=subjects,
        on=own, order=order))
    records = [decode(SubjectIndex, c.kwargs["value"]) for c in subjects.await_args_list]
    (batch,) = [decode(AuditBatch, c.kwargs["value"]) for c in audit.await_args_list]
    key = b"k-test"
    assert [(r.doc_id, r.version, r.batch_id) for r in records] == [
        ("d1", 1, batch.batch_id), ("d2", 1, batch.batch_id)]  # d3 failed: not indexed
    assert records[0].subjects == tuple(sorted([_hmac(key, "email", "ann.lee@example.com"),
                                                _hmac(key, "phone", "+14155550132")]))
    assert records[0].kinds == {"email": 1, "phone": 1}
    assert records[1].subjects == () and records[1].kinds == {}  # supersedes older mentions
    assert records[0].key_id == records[1].key_id != key_id(DEV_SUBJECT_KEY.encode())
    assert [c.kwargs["key"] for c in subjects.await_args_list] == [b"d1", b"d2"]
    assert all(c.kwargs["force"] for c in subjects.await_args_list)
    sent = b"".join(c.kwargs["value"] for c in subjects.await_args_list)
    for clear in (b"Ann.Lee", b"ann.lee", b"example.com", b"415", b"0132"):
        assert clear not in sent
    # Each index record right after its document, all before the batch's audit record.
    assert order == ["deadletter.v1", "docs.redacted.v1", "pii.subjects.v1",
                     "docs.redacted.v1", "pii.subjects.v1", "audit.batches.v1"]


# Data keys and forgets: each version sealed under its key, its leaf keyed; a forget
# destroys every earlier key and writes a receipt; a forgotten version is never resealed.
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


def test_a_forget_redone_after_a_crash_writes_the_same_receipt() -> None:
    """Killed after the keys went but before its batch was on the broker, the forget is
    consumed again: it destroys nothing more and its receipt comes out the same."""
    asyncio.run(_drive([upsert("crash", 1, "alpha"), upsert("crash", 2, "beta")]))
    first, _, _ = asyncio.run(_drive([forget_request("crash", 3, "req-c")]))
    again, _, _ = asyncio.run(_drive([forget_request("crash", 3, "req-c")]))
    one, two = (RedactedDocument.model_validate_json(m.await_args_list[0].kwargs["value"])
                for m in (first, again))
    assert one.metadata == two.metadata and forget.read_receipt(one.metadata)["versions"] == \
        [1, 2]


def test_a_forget_found_audited_already_still_destroys_its_keys() -> None:
    """Killed after the receipt's audit record was on the broker, before the keys went: the
    replay skips the audited offset and carries the forget out all the same."""
    asyncio.run(_drive([upsert("late", 1, "alpha")]))
    leaf = AuditLeaf(doc_id="late", version=2, offset=0, redacted_sha256="0" * 64,
                     raw_sha256="1" * 64)
    audited = sign(build_batch("docs.normalized.v1", 0, (0, 0), [leaf], [],
                               Tip.genesis("ep"), "fp", 1.0), SecretStr(DEV_SIGNING_KEY))
    assert isinstance(stage.keys.get("late", 1), VersionKey)
    red, _, _ = asyncio.run(_drive([forget_request("late", 2, "req-l"),
                                    upsert("after-late", 1, "beta")], [audited]))
    assert [RedactedDocument.model_validate_json(c.kwargs["value"]).doc_id
            for c in red.await_args_list] == ["after-late"]  # the forget is not written again
    assert isinstance(stage.keys.get("late", 1), Destroyed)


def test_the_keys_go_only_once_the_receipts_audit_record_is_on_the_broker() -> None:
    asyncio.run(_drive([upsert("order", 1, "alpha")]))
    order: list[str] = []
    destroy = stage.keys.destroy

    def destroying(*args: Any, **kwargs: Any) -> Any:
        order.append("destroy")
        return destroy(*args, **kwargs)
    with patch.object(stage.keys, "destroy", destroying):
        red, _, _ = asyncio.run(_drive([forget_request("order", 2, "req-o")], order=order))
    assert order.index("destroy") > order.index("audit.batches.v1") > order.index(
        "docs.redacted.v1")
    assert isinstance(stage.keys.get("order", 1), Destroyed)
    receipt = RedactedDocument.model_validate_json(red.await_args_list[0].kwargs["value"])
    assert forget.read_receipt(receipt.metadata)["keys_destroyed"] == [key_id_for("order", 1)]


def test_a_version_ingest_sealed_is_opened_redacted_and_resealed_under_the_same_key() -> None:
    """docs.normalized.v1 holds each version sealed under its key (ingest made it): the
    stage opens it, redacts the text, seals what it writes under that key, and keys the
    leaf's raw hash with it; a version whose key is gone is dead-lettered unopened."""
    from shared.contract.sealed import seal
    doc_id = f"sealed-in-{os.getpid()}-{id(object())}"
    key = stage.keys.create([(doc_id, 1)])[(doc_id, 1)]
    assert isinstance(key, VersionKey)
    raw = Document(doc_id=doc_id, version=1, text="mail ann@example.org now", source="t",
                   event_time=0, ingest_time=0)
    gone_id = doc_id + "-gone"
    gone_key = stage.keys.create([(gone_id, 1)])[(gone_id, 1)]
    assert isinstance(gone_key, VersionKey)
    gone = seal(raw.model_copy(update={"doc_id": gone_id}), gone_key)
    stage.keys.destroy(gone_id, 2, "forget r")
    red, audit, dead = asyncio.run(_drive([seal(raw, key).model_dump_json().encode(),
                                           gone.model_dump_json().encode()]))
    (sent,) = [RedactedDocument.model_validate_json(c.kwargs["value"])
               for c in red.await_args_list if c.kwargs["key"] == doc_id.encode()]
    assert sent.key_id == key.key_id and b"ann@" not in red.await_args_list[0].kwargs["value"]
    assert open_document(sent, stage.keys).text == "MAIL <EMAIL_ADDRESS> NOW"
    batch = decode(AuditBatch, audit.await_args_list[-1].kwargs["value"])
    (leaf,) = [leaf for leaf in batch.leaves if leaf.doc_id == doc_id]
    assert leaf.raw_sha256 == raw_mac(raw, key)  # of the opened text, under its key
    (letter,) = [json.loads(c.kwargs["value"]) for c in dead.await_args_list]
    assert letter["reason"] == "forgotten" and gone_id in letter["detail"]
