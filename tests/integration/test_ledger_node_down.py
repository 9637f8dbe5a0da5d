"""Kill anvil (SIGKILL) while batches are being anchored, bring it back from its state file:
the client rides out the outage, and a replay of the stream (what at-least-once delivery
does) leaves every batch anchored exactly once on chain."""

from __future__ import annotations

import hashlib
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from services.ledger.anchors import AnchorReceipt, batch_key
from services.ledger.chain import AnchorClient
from services.ledger.settings import LedgerServiceSettings
from shared.settings import LedgerSettings
from tests.integration.test_ledger_anvil import Anvil, anvil  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration
BATCHES = [(f"docs.normalized.v1/0/{i}-{i}", hashlib.sha256(b"batch %d" % i).hexdigest())
           for i in range(24)]


def stream(client: AnchorClient, out: dict[str, AnchorReceipt], pace_s: float) -> None:
    prev = ""
    for batch_id, root in BATCHES:
        out[batch_id] = client.anchor(batch_id, root, prev, 1)
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
        stored_root, _, count, block = client.contract.functions.anchors(batch_key(batch_id)).call()
        assert (stored_root.hex(), count) == (root, 1) and block > 0
        assert replay[batch_id].root == root
