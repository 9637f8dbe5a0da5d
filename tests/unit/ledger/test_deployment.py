"""Finding the contract: configured address, recorded deployment reused, or a fresh deploy."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from web3 import EthereumTesterProvider, Web3

from services.ledger.chain import AnchorClient
from services.ledger.deployment import (
    Deployment,
    artifact_code_sha256,
    read_record,
    record_path,
    write_record,
)
from services.ledger.settings import LedgerServiceSettings
from shared.contract.audit_signing import DEV_SIGNER as SIGNER
from shared.errors import ConfigError
from shared.settings import LedgerSettings


def nonce(client: AnchorClient) -> int:
    return client.w3.eth.get_transaction_count(client.sender.address)


def deployed(w3: Web3, tx_hash: str, address: str) -> Deployment:
    """The record of the deployment in `tx_hash` on `w3`'s chain."""
    receipt = w3.eth.get_transaction_receipt(tx_hash)
    return Deployment(w3.eth.chain_id, w3.eth.get_block(0)["hash"].to_0x_hex(), address,
                      artifact_code_sha256(), tx_hash, receipt["blockHash"].to_0x_hex())


def test_first_start_deploys_and_records_the_chain(
    client: AnchorClient, w3: Web3, service: LedgerServiceSettings,
) -> None:
    record = read_record(record_path(service.data_dir))
    assert record is not None and record.tx_hash
    assert record == deployed(w3, record.tx_hash, client.contract.address)
    assert w3.eth.get_transaction_receipt(record.tx_hash)["contractAddress"] == record.address
    assert w3.eth.get_code(client.contract.address)
    assert client.contract.functions.OWNER().call() == client.sender.address


def test_a_restart_on_the_same_chain_reuses_the_contract(
    client: AnchorClient, w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
) -> None:
    client.anchor("b/0/0-1", "ab" * 32, "", 2, signer=SIGNER)
    before = nonce(client)
    again = AnchorClient.connect(ledger, service, w3=w3)
    assert again.contract.address == client.contract.address
    assert nonce(again) == before  # nothing deployed
    assert again.anchor("b/0/0-1", "ab" * 32, "", 2, signer=SIGNER).already_anchored


@pytest.mark.parametrize("change", [
    {"chain_id": 1},
    {"code_sha256": ""},  # an older AuditAnchor
    {"block_hash": "0x" + "11" * 32},  # the same deployment replayed on another chain
    {"tx_hash": "0x" + "22" * 32, "block_hash": "0x" + "11" * 32},  # neither here
])
def test_a_record_from_another_chain_means_a_new_deployment(
    client: AnchorClient, w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
    change: dict,
) -> None:
    path = record_path(service.data_dir)
    write_record(path, replace(read_record(path), **change))
    fresh = AnchorClient.connect(ledger, service, w3=w3)
    assert fresh.contract.address != client.contract.address
    record = read_record(path)
    assert record == deployed(w3, record.tx_hash, fresh.contract.address)


def test_another_genesis_hash_alone_is_the_same_chain(
    client: AnchorClient, w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # anvil restarted from its state file can report another genesis block (see
    # docs/design/audit-trail.md): the contract and its deployment say it is the same chain.
    path = record_path(service.data_dir)
    write_record(path, replace(read_record(path), genesis_hash="0x" + "11" * 32))
    before = nonce(client)
    again = AnchorClient.connect(ledger, service, w3=w3)
    assert again.contract.address == client.contract.address
    assert nonce(again) == before
    assert "another chain" not in caplog.text


def test_a_record_of_an_older_version_loads_and_is_reused(
    client: AnchorClient, w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
) -> None:
    # Written before the deployment was recorded, with a genesis hash anvil no longer reports.
    path = record_path(service.data_dir)
    path.write_text(json.dumps({"chain_id": w3.eth.chain_id, "genesis_hash": "0x" + "11" * 32,
                                "address": client.contract.address,
                                "code_sha256": artifact_code_sha256()}))
    before = nonce(client)
    again = AnchorClient.connect(ledger, service, w3=w3)
    assert again.contract.address == client.contract.address
    assert nonce(again) == before


def test_a_record_of_a_newer_version_loads(service: LedgerServiceSettings) -> None:
    path = record_path(service.data_dir)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"chain_id": 5, "genesis_hash": "0x01", "address": "0x02",
                                "tx_hash": "0x03", "block_hash": "0x04", "later": True}))
    assert read_record(path) == Deployment(5, "0x01", "0x02", "", "0x03", "0x04")


def test_another_chain_is_named_in_one_warning(
    client: AnchorClient, ledger: LedgerSettings, service: LedgerServiceSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorded = read_record(record_path(service.data_dir))
    other = Web3(EthereumTesterProvider())
    with caplog.at_level(logging.WARNING, logger="services.ledger.deployment"):
        AnchorClient.connect(ledger, service, w3=other)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "another chain" in warning and f"no contract at {recorded.address}" in warning
    assert f"recorded: chain {recorded.chain_id}, contract {recorded.address}" in warning
    assert f"deployed in block {recorded.block_hash}" in warning
    assert f"genesis {other.eth.get_block(0)['hash'].to_0x_hex()}" in warning


def test_a_fresh_chain_that_looks_the_same_gets_its_own_deployment(
    client: AnchorClient, ledger: LedgerSettings, service: LedgerServiceSettings,
) -> None:
    # Two fresh eth-tester chains share chain id and genesis hash: only the missing code
    # tells them apart, so that check must not be skipped.
    other = Web3(EthereumTesterProvider())
    assert not other.eth.get_code(client.contract.address)
    fresh = AnchorClient.connect(ledger, service, w3=other)
    assert other.eth.get_code(fresh.contract.address)
    assert other.eth.get_transaction_count(fresh.sender.address) == 1
    assert read_record(record_path(service.data_dir)).address == fresh.contract.address


def test_a_record_whose_address_holds_no_code_means_a_new_deployment(
    client: AnchorClient, w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
) -> None:
    path = record_path(service.data_dir)
    write_record(path, replace(read_record(path), address="0x" + "42" * 20))
    fresh = AnchorClient.connect(ledger, service, w3=w3)
    assert w3.eth.get_code(fresh.contract.address)
    assert read_record(path).address == fresh.contract.address != "0x" + "42" * 20


def test_an_unreadable_record_is_replaced(w3: Web3, ledger: LedgerSettings,
                                          service: LedgerServiceSettings) -> None:
    path = record_path(service.data_dir)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    client = AnchorClient.connect(ledger, service, w3=w3)
    assert json.loads(path.read_text())["address"] == client.contract.address


def test_a_configured_address_is_used_as_is(
    client: AnchorClient, w3: Web3, ledger: LedgerSettings, tmp_path: Path,
) -> None:
    elsewhere = LedgerServiceSettings(data_dir=tmp_path / "other")
    pinned = ledger.model_copy(update={"contract_address": client.contract.address.lower()})
    again = AnchorClient.connect(pinned, elsewhere, w3=w3)
    assert again.contract.address == client.contract.address
    assert not record_path(elsewhere.data_dir).exists()


@pytest.mark.parametrize("address", ["0x1234", "0x" + "42" * 20])
def test_a_bad_configured_address_fails_at_start(
    w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings, address: str,
) -> None:
    with pytest.raises(ConfigError, match="STREAMRAG_LEDGER_CONTRACT_ADDRESS"):
        AnchorClient.connect(ledger.model_copy(update={"contract_address": address}), service,
                             w3=w3)


def test_a_chain_id_mismatch_fails_at_start(
    w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
) -> None:
    with pytest.raises(ConfigError, match="STREAMRAG_LEDGER_CHAIN_ID"):
        AnchorClient.connect(ledger.model_copy(update={"chain_id": 31337}), service, w3=w3)
