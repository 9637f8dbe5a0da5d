"""The ledger client against a real anvil node over HTTP, across a node restart from its state."""

from __future__ import annotations

from pathlib import Path

import pytest
from web3.exceptions import ContractLogicError

from services.ledger.anchors import batch_key
from services.ledger.chain import AnchorClient
from services.ledger.deployment import read_record, record_path
from services.ledger.settings import LedgerServiceSettings
from shared.contract.audit_signing import DEV_SIGNER as SIGNER
from shared.settings import LedgerSettings
from tests.support.anvil import Anvil, needs_anvil

pytestmark = [pytest.mark.integration, needs_anvil]


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
