"""The ledger agent with Faust's test_context and a memory store, anchoring on eth-tester."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from services.ledger.anchors import batch_key
from services.ledger.chain import AnchorClient
from services.ledger.errors import AnchorRejected
from shared.contract.audit_signing import DEV_SIGNER as SIGNER
from shared.contract.audit_signing import DEV_SIGNING_KEY, sign
from shared.contract.codec import decode, encode
from shared.contract.records import Anchor, AuditBatch, AuditLeaf, DeadLetter
from tests.support import built
from tests.support.polling import eventually_async

ROOT = "ab" * 32


def batch(batch_id: str = "docs.normalized.v1/1/0-1", root: str = ROOT,
          key: str | None = DEV_SIGNING_KEY, prev_root: str = "") -> AuditBatch:
    """A record signed with `key` (None: unsigned)."""
    leaves = tuple(AuditLeaf(doc_id=f"d{i}", version=1, redacted_sha256="0" * 64,
                             raw_sha256="1" * 64, offset=i) for i in range(2))
    record = AuditBatch(batch_id=batch_id, partition=1, first_offset=0, last_offset=1,
                        doc_count=2, entity_counts={"EMAIL_ADDRESS": 1},
                        analyzer_fingerprint="f", leaves=leaves, root=root, prev_root=prev_root,
                        created_at=1_700_000_000.0)
    return record if key is None else sign(record, SecretStr(key))


class Recorder:
    """Stands in for topic.send; records what the agent sent and wakes the test."""

    def __init__(self, on_send: Any = None) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.event = asyncio.Event()
        self.on_send = on_send

    async def send(self, *, key: bytes, value: bytes, force: bool = False) -> Any:
        if self.on_send is not None:
            self.on_send(key)
        self.sent.append((key, value))
        self.event.set()
        delivered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        delivered.set_result(None)  # the broker's acknowledgement, at once
        return delivered

    async def next(self) -> tuple[bytes, bytes]:
        await asyncio.wait_for(self.event.wait(), 10)
        self.event.clear()
        return self.sent[-1]


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: AnchorClient,
           ) -> Iterator[Any]:
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path / "svc"))
    stage = built.stage("ledger")  # a stage of its own
    stage.anchoring.client = client
    yield stage
    stage.anchored.data.clear()


def run(agents: Any, scenario: Any, anchors: Recorder | None = None,
        ) -> tuple[Recorder, Recorder]:
    anchors, dlq = anchors or Recorder(), Recorder()

    async def main() -> None:
        agents.anchors_topic.send, agents.anchoring.dlq.send = anchors.send, dlq.send
        async with agents.anchor_batches.test_context() as agent:
            await scenario(agent, anchors, dlq)

    asyncio.run(main())
    return anchors, dlq


def test_a_batch_is_anchored_once_and_announced(agents: Any, client: AnchorClient) -> None:
    async def scenario(agent: Any, anchors: Recorder, dlq: Recorder) -> None:
        await agent.put(encode(batch()), key=b"1", partition=1)
        key, value = await anchors.next()
        record = decode(Anchor, value)
        assert key == b"docs.normalized.v1/1/0-1"
        assert (record.root, record.contract) == (ROOT, client.contract.address)  # as spelled
        assert record.batch_closed_at == 1_700_000_000.0
        assert agents.anchored["docs.normalized.v1/1/0-1"] == record.model_dump(mode="json")
        await agent.put(encode(batch()), key=b"1", partition=1)  # a replay: skipped
        await agent.put(encode(batch("docs.normalized.v1/1/2-3")), key=b"1", partition=1)
        await anchors.next()

    anchors, dlq = run(agents, scenario)
    assert [k for k, _ in anchors.sent] == [b"docs.normalized.v1/1/0-1",
                                            b"docs.normalized.v1/1/2-3"]
    assert client.contract.functions.anchor_count().call() == 2 and dlq.sent == []


def test_the_announcement_is_on_the_broker_before_the_table_says_done(
        agents: Any) -> None:
    """Else a kill -9 in between leaves a batch done but never announced: its replay is
    skipped as done (seen with the table written first, under kill loops)."""
    done_at_send: list[bool] = []
    anchors = Recorder(on_send=lambda key: done_at_send.append(key.decode() in agents.anchored))

    async def scenario(agent: Any, anchors: Recorder, dlq: Recorder) -> None:
        await agent.put(encode(batch()), key=b"1", partition=1)
        await anchors.next()
        await asyncio.sleep(0)
        assert "docs.normalized.v1/1/0-1" in agents.anchored  # and then done

    run(agents, scenario, anchors)
    assert done_at_send == [False]


STRANGER_KEY = "0x" + "42" * 32


@pytest.mark.parametrize(("payload", "reason", "field"), [
    (b"{not json", "malformed_json", None),
    (encode(batch(key=None)), "bad_signature", "signature"),
    (encode(batch(key=STRANGER_KEY)), "unknown_signer", "signer"),
    (encode(batch().model_copy(update={"root": "ef" * 32})), "bad_signature", "signature"),
    (encode(batch(key=STRANGER_KEY).model_copy(update={"signer": SIGNER})),
     "bad_signature", "signature"),
    (encode(batch(root="zz")), "not_hex", "root"),
    (encode(batch(root="")), "empty_root", "root"),
])
def test_bad_batches_are_dead_lettered_without_anchoring(
    agents: Any, client: AnchorClient, payload: bytes, reason: str, field: str | None,
) -> None:
    async def scenario(agent: Any, anchors: Recorder, dlq: Recorder) -> None:
        await agent.put(payload, key=b"1", partition=1)
        _, value = await dlq.next()
        letter = decode(DeadLetter, value)
        assert (letter.stage, letter.reason, letter.field) == ("ledger", reason, field)
        assert letter.payload_b64 is None  # past ingest only a hash is kept

    anchors, _ = run(agents, scenario)
    assert anchors.sent == [] and client.contract.functions.anchor_count().call() == 0


def test_a_record_reusing_an_anchored_id_with_other_values_is_refused(
    agents: Any, client: AnchorClient,
) -> None:
    """Signed by a known key yet claiming another prev_root: a conflict, dead-lettered, and
    the chain keeps the first anchor."""
    async def scenario(agent: Any, anchors: Recorder, dlq: Recorder) -> None:
        await agent.put(encode(batch()), key=b"1", partition=1)
        await anchors.next()
        await agent.put(encode(batch(prev_root="cd" * 32)), key=b"1", partition=1)
        _, value = await dlq.next()
        letter = decode(DeadLetter, value)
        assert (letter.reason, letter.field) == ("anchored_prev_root_differs", "prev_root")

    anchors, _ = run(agents, scenario)
    assert len(anchors.sent) == 1 and client.contract.functions.anchor_count().call() == 1
    stored = client.contract.functions.anchors(batch_key("docs.normalized.v1/1/0-1")).call()
    assert (stored[1], stored[4]) == (bytes(32), SIGNER)  # the contract records the signer


def test_a_refused_anchor_stops_the_worker_instead_of_skipping_the_batch(
    agents: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    crashed: list[BaseException] = []

    class RefusingClient:
        def anchor(self, *args: Any, **kwargs: Any) -> None:
            raise AnchorRejected("anchor refused: AuditAnchor: not owner")

    async def crash(exc: BaseException) -> None:
        crashed.append(exc)

    monkeypatch.setattr(agents.anchoring, "client", RefusingClient())
    monkeypatch.setattr(agents.app, "crash", crash)

    async def scenario(agent: Any, anchors: Recorder, dlq: Recorder) -> None:
        await agent.put(encode(batch()), key=b"1", partition=1)
        await eventually_async(lambda: crashed, "the app to crash", 2, 0.02)

    anchors, dlq = run(agents, scenario)
    assert [type(exc) for exc in crashed] == [AnchorRejected]
    assert anchors.sent == dlq.sent == []
    assert agents.anchored.get("docs.normalized.v1/1/0-1") is None
