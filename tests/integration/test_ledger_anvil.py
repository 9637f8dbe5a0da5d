"""The ledger client against a real anvil node over HTTP, across a node restart from its state."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from web3.exceptions import ContractLogicError

from services.ledger.anchors import batch_key
from services.ledger.chain import AnchorClient
from services.ledger.deployment import read_record, record_path
from services.ledger.settings import LedgerServiceSettings
from shared.audit_signing import DEV_SIGNER as SIGNER
from shared.settings import LedgerSettings

REPO = Path(__file__).resolve().parents[2]
ANVIL = shutil.which("anvil") or str(REPO / ".tools" / "node_modules" / ".bin" / "anvil")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(ANVIL).exists(),
                       reason="anvil not installed: npm install @foundry-rs/anvil in .tools/"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Anvil:
    """One anvil process on a fixed port and state file; restartable."""

    def __init__(self, port: int, state: Path, log: Path) -> None:
        self.port, self.state, self.log = port, state, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [ANVIL, "--port", str(self.port), "--state", str(self.state),
               "--state-interval", "1", "--silent"]
        # Its own process group: the npm `anvil` is a node wrapper around the real binary,
        # and a signal to the wrapper alone would leave the node running.
        self.proc = subprocess.Popen(cmd, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                body = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
                if requests.post(self.url, json=body, timeout=1).ok:
                    return
            except requests.ConnectionError:
                time.sleep(0.1)
        raise TimeoutError(f"anvil on {self.url} did not answer: {self.log.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM: anvil writes its state file on the way out; SIGKILL: it does not."""
        if self.proc is not None:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=30)
            deadline = time.monotonic() + 30
            while self._answers() and time.monotonic() < deadline:
                time.sleep(0.05)  # the real node (the wrapper's child) is gone too
        self.proc = None

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False


@pytest.fixture
def anvil(tmp_path: Path) -> Iterator[Anvil]:
    node = Anvil(free_port(), tmp_path / "anvil-state.json", tmp_path / "anvil.log")
    node.start()
    try:
        yield node
    finally:
        node.stop()


def test_anchors_survive_an_anvil_restart_and_the_contract_is_reused(
    anvil: Anvil, tmp_path: Path,
) -> None:
    ledger = LedgerSettings(rpc_url=anvil.url, contract_address="", chain_id=31337,
                            confirmations=0)
    service = LedgerServiceSettings(data_dir=tmp_path / "data", retry_initial_s=0.1,
                                    retry_deadline_s=10, poll_interval_s=0.05)
    client = AnchorClient.connect(ledger, service)
    first = client.anchor("docs.normalized.v1/0/0-9", "11" * 32, "", 10, signer=SIGNER)
    second = client.anchor("docs.normalized.v1/0/10-19", "22" * 32, first.root, 10, signer=SIGNER)
    assert second.block_number > first.block_number and second.prev_root == first.root
    # A duplicate over HTTP: anvil's revert reason reaches us as ContractLogicError.
    call = client.contract.functions.anchor(batch_key(second.batch_id),
                                            bytes.fromhex("22" * 32), bytes(32), 10, SIGNER)
    with pytest.raises(ContractLogicError, match="AuditAnchor: already anchored"):
        client.sender.send(call)
    nonce = client.w3.eth.get_transaction_count(client.sender.address)

    anvil.stop()
    assert anvil.state.exists()
    anvil.start()

    again = AnchorClient.connect(ledger, service)
    assert again.contract.address == client.contract.address
    assert read_record(record_path(service.data_dir)).address == client.contract.address
    assert again.w3.eth.get_transaction_count(again.sender.address) == nonce  # no redeploy
    for before in (first, second):
        after = again.anchor(before.batch_id, before.root, before.prev_root, before.leaf_count,
                             signer=SIGNER)
        assert after.already_anchored
        assert (after.tx_hash, after.block_number, after.root, after.prev_root) == (
            before.tx_hash, before.block_number, before.root, before.prev_root)
    assert again.contract.functions.anchor_count().call() == 2
