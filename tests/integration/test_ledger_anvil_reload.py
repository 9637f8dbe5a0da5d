"""The ledger against a real anvil restarted from its state file: it reuses its contract and
anchors nothing twice even when the node reports another genesis block, and a node that
really is another chain is named as such and gets a deployment of its own.

anvil 1.7.1 adds the fresh genesis block each start makes to its state file and, reloading
the file, keeps whichever block 0 the file lists last: after a few restarts the node reports
another genesis hash than the one it had (blocks 1 and on, transactions, receipts, logs,
code and storage all survive). The ledger used to tell chains apart by that hash.
"""

from __future__ import annotations

import json
import logging
import signal
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from eth_typing import HexStr
from web3 import HTTPProvider, Web3
from web3.types import RPCEndpoint

from services.ledger.chain import AnchorClient
from services.ledger.deployment import read_record, record_path
from services.ledger.reconcile import reconcile
from services.ledger.settings import LedgerServiceSettings
from shared.contract.audit_signing import DEV_SIGNER as SIGNER
from shared.contract.records import Anchor
from shared.settings import LedgerSettings
from tests.support.anvil import Anvil, needs_anvil, running_anvil

pytestmark = [pytest.mark.integration, needs_anvil]
BATCHES = 6
CHANCE_RESTARTS = 8  # the genesis changed within 2 to 7 restarts in 12 runs here


def connect(node: Anvil, data_dir: Path) -> AnchorClient:
    ledger = LedgerSettings(rpc_url=node.url, contract_address="", chain_id=31337,
                            confirmations=0)
    service = LedgerServiceSettings(data_dir=data_dir, retry_initial_s=0.1,
                                    retry_deadline_s=10, poll_interval_s=0.05)
    return AnchorClient.connect(ledger, service)


def anchor_chain(client: AnchorClient) -> list[Anchor]:
    """BATCHES anchors chained by prev_root: the records the ledger's table keeps."""
    out, prev = [], ""
    for i in range(BATCHES):
        root = f"{i + 1:02x}" * 32
        receipt = client.anchor(f"docs.normalized.v1/0/{i}-{i}", root, prev, 1, signer=SIGNER)
        out.append(receipt.record(batch_closed_at=receipt.anchored_at))
        prev = root
    return out


def genesis(w3: Web3) -> str:
    return w3.eth.get_block(0)["hash"].to_0x_hex()


def sent_by(client: AnchorClient) -> int:
    return client.w3.eth.get_transaction_count(client.sender.address)


def txs_to(w3: Web3, address: str) -> int:
    """Transactions to `address` in every block the node has."""
    blocks = (w3.eth.get_block(n, full_transactions=True) for n in range(w3.eth.block_number + 1))
    return sum(not isinstance(tx, bytes) and tx["to"] == address
               for block in blocks for tx in block["transactions"])


def events(client: AnchorClient) -> int:
    return len(client.contract.events.Anchored.get_logs(from_block=0))


def put_a_stray_genesis_last(state: Path, original_timestamp: int) -> None:
    """List a genesis block of a later start last in the state file: what a later restart
    would do by chance, so that the test does not depend on how many it takes."""
    dump = json.loads(state.read_text())
    blocks = dump["blocks"]
    stray = next(b for b in blocks if int(b["header"]["number"], 16) == 0
                 and int(b["header"]["timestamp"], 16) != original_timestamp)
    dump["blocks"] = [b for b in blocks if b is not stray] + [stray]
    state.write_text(json.dumps(dump))


def restart_until_genesis_changes(node: Anvil, w3: Web3) -> None:
    """kill -9 and restart `node` from its state file until it reports another genesis."""
    original = w3.eth.get_block(0)
    for _ in range(CHANCE_RESTARTS):
        node.wait_saved()  # what the node holds, its fresh genesis block too, is in the file
        node.stop(signal.SIGKILL)
        node.start()
        if genesis(w3) != original["hash"].to_0x_hex():
            return
    node.wait_saved()
    node.stop(signal.SIGKILL)
    put_a_stray_genesis_last(node.state, original["timestamp"])
    node.start()
    assert genesis(w3) != original["hash"].to_0x_hex()


def test_anvil_restart_anchors_nothing_twice(anvil: Anvil, tmp_path: Path) -> None:
    data = tmp_path / "data"
    client = connect(anvil, data)
    anchors = anchor_chain(client)
    record = read_record(record_path(data))
    assert record is not None and record.genesis_hash == genesis(client.w3)
    contract = client.contract.address
    sent, to_contract = sent_by(client), txs_to(client.w3, contract)
    assert (sent, to_contract, events(client)) == (1 + BATCHES, BATCHES, BATCHES)

    restart_until_genesis_changes(anvil, client.w3)
    assert genesis(client.w3) != record.genesis_hash  # what made the old ledger redeploy

    again = connect(anvil, data)
    outcome = reconcile(again, anchors)  # no checkpoint: every anchor is read again
    assert again.contract.address == contract
    assert read_record(record_path(data)) == record
    assert (outcome.checked, outcome.reanchored, outcome.unrecoverable) == (BATCHES, [], [])
    # A replay of every batch (at-least-once delivery) finds each anchor on chain.
    for a in anchors:
        assert a.prev_root is not None and a.leaf_count is not None
        replay = again.anchor(a.batch_id, a.root, a.prev_root, a.leaf_count, signer=SIGNER)
        assert replay.already_anchored and replay.tx_hash == a.tx_hash
    assert sent_by(again) == sent  # no deployment, no anchor sent
    assert txs_to(again.w3, contract) == to_contract
    assert events(again) == again.contract.functions.anchor_count().call() == BATCHES


def another_node(folder: Path) -> AbstractContextManager[Anvil]:
    """A second, fresh anvil: another chain with the same chain id."""
    folder.mkdir()
    return running_anvil(folder)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
            and r.name == "services.ledger.deployment"]


def test_a_fresh_anvil_is_another_chain(anvil: Anvil, tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    first = connect(anvil, data)
    recorded = read_record(record_path(data))
    assert recorded is not None
    with another_node(tmp_path / "fresh") as fresh, caplog.at_level(logging.WARNING):
        moved = connect(fresh, data)
        (warning,) = warnings(caplog)
        assert "another chain" in warning and f"no contract at {recorded.address}" in warning
        assert f"recorded: chain 31337, contract {recorded.address}, deployed in block " \
               f"{recorded.block_hash}" in warning
        assert f"this one: chain 31337, genesis {genesis(moved.w3)}" in warning
        now = read_record(record_path(data))
        assert now is not None and now.tx_hash
        receipt = moved.w3.eth.get_transaction_receipt(HexStr(now.tx_hash))
        assert (receipt["contractAddress"], receipt["blockHash"].to_0x_hex()) == (
            moved.contract.address, now.block_hash)
        assert moved.w3.eth.get_code(moved.contract.address)
    assert first.w3.eth.get_code(first.contract.address)  # the first chain keeps its own


def test_a_fresh_anvil_with_the_same_deployment_is_another_chain(
    anvil: Anvil, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Dev chains are deterministic: the same key deploys the same code at the same address
    on a fresh node. Only the block of the deployment tells the two apart."""
    data = tmp_path / "data"
    # One empty block first: two nodes started in the same second have the same genesis and
    # would mine the same deployment block; these two chains must differ.
    Web3(HTTPProvider(anvil.url)).provider.make_request(RPCEndpoint("evm_mine"), [])
    first = connect(anvil, data)
    recorded = read_record(record_path(data))
    assert recorded is not None
    with another_node(tmp_path / "twin") as twin, caplog.at_level(logging.WARNING):
        copy = connect(twin, tmp_path / "twin-data")
        assert copy.contract.address == first.contract.address
        assert twin_code_is_the_same(copy, first)
        moved = connect(twin, data)
        (warning,) = warnings(caplog)
        assert "another chain" in warning and recorded.block_hash in warning
        assert moved.contract.address != first.contract.address
        assert sent_by(moved) == 2  # the twin's deployment and this one
        now = read_record(record_path(data))
        assert now is not None and now.address == moved.contract.address


def twin_code_is_the_same(a: AnchorClient, b: AnchorClient) -> bool:
    return bool(a.w3.eth.get_code(a.contract.address) == b.w3.eth.get_code(b.contract.address))
