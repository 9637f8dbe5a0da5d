"""Kill anvil (SIGKILL) while batches are being anchored, bring it back from its state file:
the client rides out the outage, and a replay of the stream (what at-least-once delivery
does) leaves every batch anchored exactly once on chain. The worker test does the same to a
real ledger worker on a real broker: anchors the node lost are restored by reconciliation."""

from __future__ import annotations

import asyncio
import hashlib
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import SecretStr
from web3 import HTTPProvider, Web3

from services.ledger.anchors import AnchorReceipt, batch_key
from services.ledger.chain import AnchorClient
from services.ledger.deployment import at, read_record, record_path
from services.ledger.settings import LedgerServiceSettings
from shared.admin import ensure_topics
from shared.audit_signing import DEV_SIGNER as SIGNER
from shared.audit_signing import DEV_SIGNING_KEY, sign
from shared.cli.mesh import free_port, spawn_broker
from shared.cli.procs import service_argv, spawn, stop
from shared.codec import decode, encode
from shared.records import Anchor, AuditBatch, AuditLeaf
from shared.settings import KafkaSettings, LedgerSettings
from shared.topics import AUDIT_BATCHES, LEDGER_ANCHORS
from tests.integration.test_ledger_anvil import Anvil, anvil  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration
BATCHES = [(f"docs.normalized.v1/0/{i}-{i}", hashlib.sha256(b"batch %d" % i).hexdigest())
           for i in range(24)]


def stream(client: AnchorClient, out: dict[str, AnchorReceipt], pace_s: float) -> None:
    prev = ""
    for batch_id, root in BATCHES:
        out[batch_id] = client.anchor(batch_id, root, prev, 1, signer=SIGNER)
        prev = root
        time.sleep(pace_s)


def test_node_killed_mid_stream_every_batch_anchored_exactly_once(
    anvil: Anvil, tmp_path: Path,  # noqa: F811 - the fixture
) -> None:
    ledger = LedgerSettings(rpc_url=anvil.url, chain_id=31337, confirmations=0)
    service = LedgerServiceSettings(data_dir=tmp_path / "data", retry_initial_s=0.1,
                                    retry_max_s=0.5, retry_deadline_s=90, poll_interval_s=0.05,
                                    receipt_timeout_s=30)
    client = AnchorClient.connect(ledger, service)
    time.sleep(1.5)  # the deployment is in the state file before the node dies
    done: dict[str, AnchorReceipt] = {}
    worker = threading.Thread(target=stream, args=(client, done, 0.1))
    worker.start()
    while len(done) < 8:
        time.sleep(0.05)
    anvil.stop(signal.SIGKILL)  # no goodbye: whatever was not in the state file is lost
    assert not anvil._answers()
    time.sleep(1.0)
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


def kill_right_after_an_unsaved_anchor(anvil: Anvil, count: Callable[[], int]) -> None:  # noqa: F811
    """Return just after anvil wrote its state file and then confirmed one more anchor (and
    the worker had time to see the receipt): a SIGKILL now loses at least that anchor."""
    for _ in range(20):
        seen = anvil.state.stat().st_mtime_ns
        until(lambda seen=seen: anvil.state.stat().st_mtime_ns != seen, "a state write", 5)
        dumped, before = time.monotonic(), count()
        while count() == before and time.monotonic() - dumped < 0.5:
            time.sleep(0.01)
        if count() > before:
            time.sleep(0.25)  # the worker polls receipts every 0.05 s
            if time.monotonic() - dumped < 0.85:  # the next write comes 1 s after the last
                return
    raise AssertionError("never caught an anchor between two state-file writes")


def until(check: Callable[[], object], what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_worker_reanchors_what_the_restarted_node_lost(
    anvil: Anvil, tmp_path: Path,  # noqa: F811 - the fixture
) -> None:
    """A real ledger worker on its own broker: the node forgets the anchors of its last second,
    the worker's table still says they are done, and reconciliation anchors them again."""
    port = free_port()
    broker = spawn_broker("127.0.0.1", port, tmp_path / "broker")
    children = [broker]
    data = tmp_path / "data"
    try:
        kafka = KafkaSettings(bootstrap=f"127.0.0.1:{port}")
        asyncio.run(ensure_topics(kafka))
        env = {"STREAMRAG_KAFKA_BOOTSTRAP": kafka.bootstrap, "STREAMRAG_LEDGER_RPC_URL": anvil.url,
               "STREAMRAG_LEDGERSVC_DATA_DIR": str(data),
               "STREAMRAG_LEDGERSVC_RECONCILE_INTERVAL_S": "1",
               "STREAMRAG_LEDGERSVC_RETRY_INITIAL_S": "0.1",
               "STREAMRAG_LEDGERSVC_RETRY_MAX_S": "0.5",
               "STREAMRAG_LEDGERSVC_RETRY_DEADLINE_S": "20",
               "STREAMRAG_LEDGERSVC_RECEIPT_TIMEOUT_S": "5",
               "STREAMRAG_LEDGERSVC_POLL_INTERVAL_S": "0.05"}
        worker = spawn("ledger", service_argv("ledger"), tmp_path / "run", env)
        children.append(worker)
        w3 = Web3(HTTPProvider(anvil.url, exception_retry_configuration=None))
        until(lambda: read_record(record_path(data)) is not None, "the contract deployment")
        contract = at(w3, read_record(record_path(data)).address)  # type: ignore[union-attr]

        def count() -> int:
            return int(contract.functions.anchor_count().call())

        produce(kafka.bootstrap, [audit_batch(0)], 0)
        until(lambda: count() == 1, "the first anchor")
        time.sleep(1.5)  # the deployment and first anchor are in the state file
        feeder = threading.Thread(target=produce, args=(
            kafka.bootstrap, [audit_batch(i) for i in range(1, len(BATCHES))], 0.25))
        feeder.start()
        until(lambda: count() >= 4, "4 anchors")
        kill_right_after_an_unsaved_anchor(anvil, count)
        killed_at = time.time()
        anvil.stop(signal.SIGKILL)  # no goodbye: the last second of anchors is lost
        time.sleep(1.0)
        anvil.start()
        feeder.join(timeout=60)
        assert not feeder.is_alive() and worker.alive(), worker.log_path.read_text()[-3000:]

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
        # chain. Only anchors confirmed before the kill (so marked done in the worker's table,
        # so never replayed) can have been lost, and only reconciliation re-anchors them.
        records: dict[str, list[Anchor]] = {}
        for record in announced(kafka.bootstrap):
            records.setdefault(record.batch_id, []).append(record)
        on_chain = {bytes(e["args"]["batch_id"]): e["transactionHash"].to_0x_hex()
                    for e in contract.events.Anchored.get_logs(from_block=0)}
        assert {b: rs[-1].tx_hash for b, rs in records.items()} == \
            {b: on_chain[batch_key(b)] for b, _ in BATCHES}
        log = worker.log_path.read_text()
        reanchored = set(re.findall(r"anchor of (\S+) was gone from the chain", log))
        assert reanchored == {b for b, rs in records.items() if len(rs) == 2}
        assert all(records[b][0].anchored_at < killed_at for b in reanchored)
        assert all(len(rs) <= 2 for rs in records.values())
        assert reanchored, "the kill was timed to lose at least one confirmed anchor"
        print(f"the restarted node had lost {len(reanchored)} confirmed anchors; re-anchored")
    finally:
        stop(list(children), 15)
