"""Finding the contract: configured address, recorded deployment reused, or a fresh deploy."""

from __future__ import annotations

import json
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


def test_first_start_deploys_and_records_the_chain(
    client: AnchorClient, w3: Web3, service: LedgerServiceSettings,
) -> None:
    record = read_record(record_path(service.data_dir))
    assert record == Deployment(w3.eth.chain_id, w3.eth.get_block(0)["hash"].to_0x_hex(),
                                client.contract.address, artifact_code_sha256())
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


@pytest.mark.parametrize("change", [{"genesis_hash": "0x" + "11" * 32}, {"chain_id": 1},
                                    {"code_sha256": ""}])  # an older AuditAnchor
def test_a_record_from_another_chain_means_a_new_deployment(
    client: AnchorClient, w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings,
    change: dict,
) -> None:
    path = record_path(service.data_dir)
    write_record(path, replace(read_record(path), **change))
    fresh = AnchorClient.connect(ledger, service, w3=w3)
    assert fresh.contract.address != client.contract.address
    assert read_record(path) == Deployment(w3.eth.chain_id, w3.eth.get_block(0)["hash"].to_0x_hex(),
                                           fresh.contract.address, artifact_code_sha256())


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
