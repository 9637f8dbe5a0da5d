"""The ledger's query-audit agent on eth-tester: runs of authentic audits anchored, forged
ones dead-lettered, roots chained per partition."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import SecretStr

from services.ledger.anchors import batch_key
from services.ledger.chain import AnchorClient
from services.ledger.queries import Chains, QueryAnchors
from shared.contract.audit_signing import DEV_QUERY_SIGNER, DEV_QUERY_SIGNING_KEY, sign
from shared.contract.codec import decode, encode
from shared.contract.query_audit import GENESIS_ROOT, Tip, batch_root
from shared.contract.records import Anchor, DeadLetter, QueryAudit
from tests.support import built

KEY = SecretStr(DEV_QUERY_SIGNING_KEY)


def audit(n: int, key: SecretStr | None = KEY) -> QueryAudit:
    record = QueryAudit(query_id=f"q{n}", method="Query", principal="", principal_kind="open",
                        scope="*", at=1_700_000_000.0 + n,
                        question_sha256=hashlib.sha256(b"q").hexdigest(), answer_mode="x",
                        shown=("c1",), docs=("d1@v1",), cited=("c1",))
    return record if key is None else sign(record, key)


class Sent:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []

    async def send(self, *, key: bytes, value: bytes, force: bool = False, **_: Any) -> Any:
        self.records.append((key, value))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class Stream:
    """What current_event needs of a Faust stream."""

    current_event: Any = None

    def _set_current_event(self, event: Any) -> None:
        self.current_event = event


def event(offset: int, value: bytes, partition: int = 2) -> Any:
    message = SimpleNamespace(topic="audit.queries.v1", partition=partition, offset=offset,
                              key=b"k", value=value, headers=[], timestamp=0.0)
    return SimpleNamespace(message=message, headers={})


@pytest.fixture
def queries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: AnchorClient,
            ) -> Iterator[tuple[QueryAnchors, Sent, Sent, dict[str, Any]]]:
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path / "svc"))
    stage = built.stage("ledger")  # a stage of its own
    module = stage.queries
    stage.anchoring.client = client
    anchors, dlq, table = Sent(), Sent(), {}
    monkeypatch.setattr(stage.anchors_topic, "send", anchors.send)
    monkeypatch.setattr(stage.anchoring.dlq, "send", dlq.send)
    module.anchored, module.chains = table, Chains(table)
    yield module, anchors, dlq, table


def test_runs_of_authentic_audits_are_anchored_and_chained_and_forgeries_dead_lettered(
    queries: tuple[QueryAnchors, Sent, Sent, dict[str, Any]], client: AnchorClient,
) -> None:
    module, anchors, dlq, table = queries
    a0, a1, a3, a5 = audit(0), audit(1), audit(3), audit(5)
    tampered = a1.model_copy(update={"cited": ("c9",)})
    events = [event(10, encode(a0)), event(11, encode(a1)), event(12, encode(tampered)),
              event(13, encode(a3)), event(14, b"{not json"),
              event(15, encode(audit(4, SecretStr("0x" + "42" * 32))))]
    first = asyncio.run(module.anchor_partition(Stream(), 2, events))
    epoch = module.chains.tips[2].epoch
    assert first == [f"{epoch}/audit.queries.v1/2/10-13"]
    assert sorted(decode(DeadLetter, v).reason for _, v in dlq.records) == [
        "bad_signature", "malformed_json", "unknown_signer"]
    record = decode(Anchor, anchors.records[0][1])
    assert (record.root, record.leaf_count, record.prev_root) == (
        batch_root([a0, a1, a3]), 3, GENESIS_ROOT)
    assert record.signer == DEV_QUERY_SIGNER and table[first[0]]["root"] == record.root
    on_chain = client.contract.functions.anchors(batch_key(first[0])).call()
    assert (on_chain[0].hex(), on_chain[2], on_chain[4]) == (record.root, 3, DEV_QUERY_SIGNER)

    second = asyncio.run(module.anchor_partition(Stream(), 2, [event(16, encode(a5))]))
    chained = decode(Anchor, anchors.records[-1][1])
    assert second == [f"{epoch}/audit.queries.v1/2/16-16"]
    assert chained.prev_root == record.root and chained.root == batch_root([a5])


def test_a_replay_after_a_restart_skips_what_the_table_says_is_anchored_and_links_to_it(
    queries: tuple[QueryAnchors, Sent, Sent, dict[str, Any]],
) -> None:
    """A restarted worker (no chain end in memory) is handed offsets 10-13 again plus two
    new audits: it continues the anchored chain from the table, anchoring 14-15 only."""
    module, anchors, _, table = queries
    audits = [audit(n) for n in range(6)]
    (first,) = asyncio.run(module.anchor_partition(
        Stream(), 2, [event(10 + n, encode(audits[n])) for n in range(4)]))
    module.chains = Chains(table)  # a restart: only the table is left
    again = asyncio.run(module.anchor_partition(
        Stream(), 2, [event(10 + n, encode(audits[n])) for n in range(6)]))
    epoch = first.split("/")[0]
    assert again == [f"{epoch}/audit.queries.v1/2/14-15"]
    assert [k.decode() for k, _ in anchors.records] == [first, again[0]]
    chained = decode(Anchor, anchors.records[-1][1])
    assert chained.prev_root == table[first]["root"] == batch_root(audits[:4])
    assert chained.root == batch_root(audits[4:])
    assert module.chains.tips[2].last_offset == 15


def test_offsets_another_worker_anchored_from_another_chain_end_are_left_as_they_are(
    queries: tuple[QueryAnchors, Sent, Sent, dict[str, Any]], client: AnchorClient,
) -> None:
    """A rebalance race: the same offsets anchored first with another prev_root. The worker
    neither crashes nor announces a second anchor, and its chain goes on from the batch."""
    module, anchors, _, _ = queries
    module.chains.tips[2] = Tip("ep", "cd" * 32, 9)
    audits = [audit(n) for n in range(3)]
    batch_id = "ep/audit.queries.v1/2/10-11"
    client.anchor(batch_id, batch_root(audits[:2]), "ef" * 32, 2, signer=DEV_QUERY_SIGNER)
    done = asyncio.run(module.anchor_partition(
        Stream(), 2, [event(10 + n, encode(audits[n])) for n in range(2)]))
    assert done == [] and anchors.records == []
    assert module.chains.tips[2] == Tip("ep", batch_root(audits[:2]), 11)
    (after,) = asyncio.run(module.anchor_partition(Stream(), 2, [event(12, encode(audits[2]))]))
    assert decode(Anchor, anchors.records[-1][1]).prev_root == batch_root(audits[:2])
    assert after == "ep/audit.queries.v1/2/12-12"
