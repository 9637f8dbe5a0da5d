"""Reconciliation on eth-tester: a revert to a snapshot stands in for a node that lost its
last seconds (restart from an older state file) or a reorg that dropped confirmed anchors."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from web3 import Web3

from services.ledger.anchors import batch_key
from services.ledger.chain import AnchorClient
from services.ledger.reconcile import recent, reconcile
from shared.contract.audit_signing import DEV_SIGNER as SIGNER
from shared.contract.codec import decode
from shared.contract.records import Anchor
from tests.support import built

IDS = [f"docs.normalized.v1/0/{i}-{i}" for i in range(5)]
ROOTS = [hashlib.sha256(i.encode()).hexdigest() for i in IDS]


def anchor_all(client: AnchorClient, upto: int, start: int = 0) -> list[Anchor]:
    """Anchor IDS[start:upto] as a chain; the Anchor records the agent would keep."""
    out = []
    for i in range(start, upto):
        prev = ROOTS[i - 1] if i else ""
        receipt = client.anchor(IDS[i], ROOTS[i], prev, i + 1, signer=SIGNER)
        out.append(receipt.record(batch_closed_at=receipt.anchored_at - 1))
    return out


def events_per_batch(client: AnchorClient) -> Counter[bytes]:
    return Counter(bytes(e["args"]["batch_id"])
                   for e in client.contract.events.Anchored.get_logs(from_block=0))


def on_chain(client: AnchorClient, batch_id: str) -> tuple[str, str, int]:
    root, prev, count, _, _ = client.contract.functions.anchors(batch_key(batch_id)).call()
    return root.hex(), prev.hex(), count


def test_recent_keeps_the_window_and_the_newest_up_to_the_limit_oldest_first() -> None:
    def rec(batch_id: str, at: float) -> dict[str, Any]:
        return Anchor(batch_id=batch_id, root="ab" * 32, tx_hash="0x", block_number=1,
                      contract="0x", chain_id=1, anchored_at=at, batch_closed_at=at,
                      prev_root="", leaf_count=1).model_dump(mode="json")

    values = [rec("a", 100.0), rec("d", 990.0), rec("b", 950.0), rec("c", 980.0),
              rec("old", 899.9)]
    assert [a.batch_id for a in recent(values, 1000.0, 100.0, 10)] == ["b", "c", "d"]
    assert [a.batch_id for a in recent(values, 1000.0, 100.0, 2)] == ["c", "d"]
    assert recent([], 1000.0, 100.0, 2) == []


def test_lost_anchors_are_reanchored_exactly_once(w3: Web3, client: AnchorClient) -> None:
    tester = w3.provider.ethereum_tester  # type: ignore[attr-defined]
    kept = anchor_all(client, 2)
    snapshot = tester.take_snapshot()  # what the state file held when the node died
    lost = anchor_all(client, 5, start=2)
    tester.revert_to_snapshot(snapshot)
    assert [client.is_anchored(i) for i in IDS] == [True, True, False, False, False]

    outcome = reconcile(client, kept + lost)
    assert outcome.checked == 5 and outcome.unrecoverable == []
    assert [r.batch_id for r in outcome.reanchored] == IDS[2:]  # in chain order
    assert all(not r.already_anchored for r in outcome.reanchored)
    assert events_per_batch(client) == {batch_key(i): 1 for i in IDS}
    for i, batch_id in enumerate(IDS):  # the same root, prev_root and leaf count as before
        assert on_chain(client, batch_id) == (ROOTS[i], ROOTS[i - 1] if i else "00" * 32, i + 1)

    again = reconcile(client, kept + lost)  # the next round: nothing to do
    assert (again.checked, again.reanchored) == (5, [])
    assert client.contract.functions.anchor_count().call() == 5
    assert events_per_batch(client) == {batch_key(i): 1 for i in IDS}


def test_a_lost_anchor_recorded_without_its_prev_root_is_reported_not_guessed(
    w3: Web3, client: AnchorClient,
) -> None:
    tester = w3.provider.ethereum_tester  # type: ignore[attr-defined]
    snapshot = tester.take_snapshot()
    (old,) = anchor_all(client, 1)
    tester.revert_to_snapshot(snapshot)
    legacy = old.model_copy(update={"prev_root": None, "leaf_count": None})
    outcome = reconcile(client, [legacy])
    assert (outcome.reanchored, outcome.unrecoverable) == ([], [IDS[0]])
    assert not client.is_anchored(IDS[0])


def test_the_agents_timer_reanchors_from_the_table_and_announces_it(
    w3: Web3, client: AnchorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMRAG_DATA_DIR", str(tmp_path / "svc"))
    agents = built.stage("ledger")  # a stage of its own: no checkpoint yet
    agents.anchoring.client = client
    tester = w3.provider.ethereum_tester  # type: ignore[attr-defined]
    snapshot = tester.take_snapshot()
    records = anchor_all(client, 3)
    tester.revert_to_snapshot(snapshot)
    sent: list[tuple[bytes, bytes]] = []

    async def send(*, key: bytes, value: bytes) -> None:
        sent.append((key, value))

    monkeypatch.setattr(agents.anchors_topic, "send", send)
    try:
        for record in records:
            agents.anchored.data[record.batch_id] = record.model_dump(mode="json")
        asyncio.run(agents.reconcile_once())
        asyncio.run(agents.reconcile_once())  # the second round finds all anchored
    finally:
        agents.anchored.data.clear()
    assert [k for k, _ in sent] == [i.encode() for i in IDS[:3]]
    announced = [decode(Anchor, v) for _, v in sent]
    assert [(a.root, a.leaf_count) for a in announced] == [(ROOTS[i], i + 1) for i in range(3)]
    assert [a.batch_closed_at for a in announced] == [r.batch_closed_at for r in records]
    assert events_per_batch(client) == {batch_key(i): 1 for i in IDS[:3]}


class Counting:
    """The client, counting the per-anchor reads a round makes."""

    def __init__(self, client: AnchorClient) -> None:
        self.client, self.reads = client, 0

    def anchored_block(self, batch_id: str) -> int:
        self.reads += 1
        return self.client.anchored_block(batch_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_anchors_verified_below_a_block_the_chain_still_has_are_not_read_again(
        client: AnchorClient) -> None:
    counting = Counting(client)
    first = anchor_all(client, 3)
    one = reconcile(counting, first)
    assert (one.checked, one.skipped, counting.reads) == (3, 0, 3)
    assert one.checkpoint is not None and one.checkpoint.verified == frozenset(IDS[:3])
    later = anchor_all(client, 5, start=3)
    two = reconcile(counting, first + later, one.checkpoint)
    assert (two.checked, two.skipped, counting.reads) == (2, 3, 5)
    assert two.reanchored == [] and two.checkpoint is not None
    assert two.checkpoint.verified == frozenset(IDS)
    assert two.checkpoint.number > one.checkpoint.number
    three = reconcile(counting, first + later, two.checkpoint)
    assert (three.checked, three.skipped, counting.reads) == (0, 5, 5)


@pytest.mark.parametrize("mine_past", [False, True])
def test_a_lost_checkpoint_block_makes_the_round_check_and_reanchor_everything(
        w3: Web3, client: AnchorClient, mine_past: bool) -> None:
    """The node restarted from an older state (or reorged): the checkpoint's block is gone
    (the chain is shorter) or another block now has its height (mined past it)."""
    tester = w3.provider.ethereum_tester  # type: ignore[attr-defined]
    kept = anchor_all(client, 2)
    snapshot = tester.take_snapshot()
    lost = anchor_all(client, 5, start=2)
    one = reconcile(client, kept + lost)
    assert one.checkpoint is not None and one.checkpoint.verified == frozenset(IDS)
    tester.revert_to_snapshot(snapshot)
    if mine_past:
        tester.mine_blocks(one.checkpoint.number + 2 - client.head()[0])
        assert client.block_hash(one.checkpoint.number) not in (None, one.checkpoint.hash)
    else:
        assert client.block_hash(one.checkpoint.number) is None
    two = reconcile(client, kept + lost, one.checkpoint)
    assert (two.checked, two.skipped) == (5, 0)
    assert [r.batch_id for r in two.reanchored] == IDS[2:]
    assert events_per_batch(client) == {batch_key(i): 1 for i in IDS}


def test_a_checkpoint_with_another_hash_trusts_nothing(client: AnchorClient) -> None:
    from services.ledger.reconcile import Checkpoint

    records = anchor_all(client, 2)
    number, _ = client.head()
    forged = Checkpoint(number, "00" * 32, frozenset(IDS[:2]))
    counting = Counting(client)
    out = reconcile(counting, records, forged)
    assert (out.checked, out.skipped, counting.reads) == (2, 0, 2)
