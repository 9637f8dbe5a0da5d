"""Kill anvil (SIGKILL) while batches are being anchored, bring it back from its state file:
the client rides out the outage, and a replay of the stream (what at-least-once delivery
does) leaves every batch anchored exactly once on chain. The worker test does the same to a
real ledger worker on a real broker, with the node brought back from an older copy of its
state file, so that it has certainly lost anchors the worker saw confirmed: reconciliation
restores exactly those."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import SecretStr
from web3 import HTTPProvider, Web3

from services.cli.mesh import free_port, spawn_broker
from services.cli.procs import service_argv, spawn, stop
from services.ledger.anchors import AnchorReceipt, batch_key
from services.ledger.chain import AnchorClient
from services.ledger.deployment import at, read_record, record_path
from services.ledger.settings import LedgerServiceSettings
from shared.contract.audit_signing import DEV_SIGNER as SIGNER
from shared.contract.audit_signing import DEV_SIGNING_KEY, sign
from shared.contract.codec import decode, encode
from shared.contract.records import Anchor, AuditBatch, AuditLeaf
from shared.contract.topics import AUDIT_BATCHES, LEDGER_ANCHORS
from shared.kafka.admin import ensure_topics
from shared.settings import KafkaSettings, LedgerSettings
from tests.support.anvil import Anvil, needs_anvil
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, needs_anvil]
BATCHES = [(f"docs.normalized.v1/0/{i}-{i}", hashlib.sha256(b"batch %d" % i).hexdigest())
           for i in range(24)]
OUTAGE_S = 1.0  # how long the node stays dead: the client meets it on several calls


def stream(client: AnchorClient, out: dict[str, AnchorReceipt], pace_s: float) -> None:
    prev = ""
    for batch_id, root in BATCHES:
        out[batch_id] = client.anchor(batch_id, root, prev, 1, signer=SIGNER)
        prev = root
        time.sleep(pace_s)  # the stream is still flowing when the node dies


def test_node_killed_mid_stream_every_batch_anchored_exactly_once(
    anvil: Anvil, tmp_path: Path,
) -> None:
    ledger = LedgerSettings(rpc_url=anvil.url, chain_id=31337, confirmations=0)
    service = LedgerServiceSettings(data_dir=tmp_path / "data", retry_initial_s=0.1,
                                    retry_max_s=0.5, retry_deadline_s=90, poll_interval_s=0.05,
                                    receipt_timeout_s=30)
    client = AnchorClient.connect(ledger, service)
    anvil.wait_saved()  # the deployment is in the state file before the node dies
    done: dict[str, AnchorReceipt] = {}
    worker = threading.Thread(target=stream, args=(client, done, 0.1))
    worker.start()
    eventually(lambda: len(done) >= 8, "8 anchors before the kill", 120, 0.05)
    anvil.stop(signal.SIGKILL)  # no goodbye: whatever was not in the state file is lost
    assert not anvil.answers()
    time.sleep(OUTAGE_S)
    assert len(done) < len(BATCHES), "the node died after the stream ended"
    anvil.start()
    worker.join(timeout=180)
    assert not worker.is_alive() and len(done) == len(BATCHES)

    # The restarted node may have lost the last second of anchors; the replay restores them
    # and must not anchor anything twice.
    replay: dict[str, AnchorReceipt] = {}
    stream(client, replay, 0.0)
    events = client.contract.events.Anchored.get_logs(from_block=0)
    assert Counter(bytes(e["args"]["batch_id"]) for e in events) == \
        {batch_key(batch_id): 1 for batch_id, _ in BATCHES}
    assert client.contract.functions.anchor_count().call() == len(BATCHES)
    for batch_id, root in BATCHES:
        stored_root, _, count, block, _ = client.contract.functions.anchors(
            batch_key(batch_id)).call()
        assert (stored_root.hex(), count) == (root, 1) and block > 0
        assert replay[batch_id].root == root


def audit_batch(i: int) -> AuditBatch:
    batch_id, root = BATCHES[i]
    leaf = AuditLeaf(doc_id=f"d{i}", version=1, redacted_sha256="0" * 64, raw_sha256="1" * 64,
                     offset=i)
    # Signed with the dev key, whose address the ledger trusts by default.
    return sign(AuditBatch(batch_id=batch_id, partition=0, first_offset=i, last_offset=i,
                           doc_count=1, entity_counts={}, analyzer_fingerprint="f",
                           leaves=(leaf,), root=root, prev_root=BATCHES[i - 1][1] if i else "",
                           created_at=time.time()), SecretStr(DEV_SIGNING_KEY))


def produce(bootstrap: str, batches: list[AuditBatch], pace_s: float) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for batch in batches:
                await producer.send_and_wait(AUDIT_BATCHES.name, encode(batch), key=b"0",
                                             partition=0)
                await asyncio.sleep(pace_s)
        finally:
            await producer.stop()
    asyncio.run(go())


def announced(bootstrap: str) -> list[Anchor]:
    """Every record on ledger.anchors.v1, in order."""
    async def go() -> list[Anchor]:
        consumer = AIOKafkaConsumer(LEDGER_ANCHORS.name, bootstrap_servers=bootstrap,
                                    auto_offset_reset="earliest", group_id=None)
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=3000)
            return [decode(Anchor, m.value) for ms in batches.values() for m in ms]
        finally:
            await consumer.stop()
    return asyncio.run(go())


def until(check: Callable[[], object], what: str) -> None:
    eventually(check, what, 180, 0.1)


SAVED = 5  # batches 0..4 are in the state copy the node comes back from
LOST = range(SAVED, 10)  # 5..9: confirmed, announced, then lost with the node's state


def test_worker_reanchors_what_the_restarted_node_lost(anvil: Anvil, tmp_path: Path) -> None:
    """A real ledger worker on its own broker: the node comes back without the anchors of
    batches 5..9, the worker's table still says they are done (so no replay brings them),
    and reconciliation anchors exactly those again."""
    port = free_port()
    broker = spawn_broker("127.0.0.1", port, tmp_path / "broker")
    children = [broker]
    data = tmp_path / "data"
    try:
        kafka = KafkaSettings(bootstrap=f"127.0.0.1:{port}")
        asyncio.run(ensure_topics(kafka))
        env = {"STREAMRAG_KAFKA_BOOTSTRAP": kafka.bootstrap, "STREAMRAG_LEDGER_RPC_URL": anvil.url,
               "STREAMRAG_DATA_DIR": str(data),
               "STREAMRAG_LEDGER_RECONCILE_INTERVAL_S": "1",
               "STREAMRAG_LEDGER_RETRY_INITIAL_S": "0.1",
               "STREAMRAG_LEDGER_RETRY_MAX_S": "0.5",
               "STREAMRAG_LEDGER_RETRY_DEADLINE_S": "20",
               "STREAMRAG_LEDGER_RECEIPT_TIMEOUT_S": "5",
               "STREAMRAG_LEDGER_POLL_INTERVAL_S": "0.05"}
        worker = spawn("ledger", service_argv("ledger"), tmp_path / "run", env)
        children.append(worker)
        w3 = Web3(HTTPProvider(anvil.url, exception_retry_configuration=None))
        until(lambda: read_record(record_path(data)) is not None, "the contract deployment")
        contract = at(w3, read_record(record_path(data)).address)  # type: ignore[union-attr]

        def count() -> int:
            return int(contract.functions.anchor_count().call())

        def announced_ids() -> set[str]:
            return {a.batch_id for a in announced(kafka.bootstrap)}

        produce(kafka.bootstrap, [audit_batch(i) for i in range(SAVED)], 0)
        until(lambda: count() == SAVED, f"the first {SAVED} anchors")
        anvil.wait_saved()
        saved = anvil.state.read_bytes()
        json.loads(saved)  # a whole state file, not one caught mid-write
        produce(kafka.bootstrap, [audit_batch(i) for i in LOST], 0)
        lost_ids = {BATCHES[i][0] for i in LOST}
        # Announced means confirmed and marked done in the worker's table.
        until(lambda: lost_ids <= announced_ids(), "the anchors the node will lose")
        anvil.stop(signal.SIGKILL)
        anvil.state.write_bytes(saved)  # the node comes back as it was after batch 4
        time.sleep(OUTAGE_S)
        anvil.start()
        produce(kafka.bootstrap, [audit_batch(i) for i in range(LOST.stop, len(BATCHES))], 0.1)
        assert worker.alive(), worker.log_path.read_text()[-3000:]

        def all_once() -> bool:
            events = contract.events.Anchored.get_logs(from_block=0)
            got = Counter(bytes(e["args"]["batch_id"]) for e in events)
            return got == {batch_key(b): 1 for b, _ in BATCHES}

        until(all_once, "every batch anchored exactly once")
        assert count() == len(BATCHES)
        for i, (batch_id, root) in enumerate(BATCHES):
            stored, prev, leaves, _, _ = contract.functions.anchors(batch_key(batch_id)).call()
            assert (stored.hex(), prev.hex(), leaves) == (
                root, BATCHES[i - 1][1] if i else "00" * 32, 1)
        # A re-anchor is announced again; the last announcement of each batch is its tx on
        # chain, and exactly the lost batches were announced twice.
        on_chain = {bytes(e["args"]["batch_id"]): e["transactionHash"].to_0x_hex()
                    for e in contract.events.Anchored.get_logs(from_block=0)}

        def announced_as_on_chain() -> Any:
            records: dict[str, list[Anchor]] = {}
            for record in announced(kafka.bootstrap):
                records.setdefault(record.batch_id, []).append(record)
            last = {b: rs[-1].tx_hash for b, rs in records.items()}
            return records if last == {b: on_chain[batch_key(b)] for b, _ in BATCHES} else None

        # The worker announces a batch after its tx is mined: the chain holding every anchor
        # says nothing of the last announcements, which may still be on their way.
        records = eventually(announced_as_on_chain,
                             "the last announcement of each batch to name its tx on chain",
                             180, 0.1)
        assert {b for b, rs in records.items() if len(rs) == 2} == lost_ids
        assert all(len(rs) <= 2 for rs in records.values())
    finally:
        stop(list(children), 15)
