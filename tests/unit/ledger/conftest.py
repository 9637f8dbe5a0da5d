"""Fixtures for the ledger: an in-process chain (eth-tester), funded keys, settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr
from web3 import EthereumTesterProvider, Web3

from services.ledger.chain import AnchorClient
from services.ledger.settings import LedgerServiceSettings
from shared.settings import LedgerSettings
from tests.unit.ledger.keys import OWNER_KEY


@pytest.fixture
def w3() -> Web3:
    return Web3(EthereumTesterProvider())


@pytest.fixture
def ledger() -> LedgerSettings:
    return LedgerSettings(private_key=SecretStr(OWNER_KEY), contract_address="", chain_id=None,
                          confirmations=0)


@pytest.fixture
def service(tmp_path: Path) -> LedgerServiceSettings:
    return LedgerServiceSettings(data_dir=tmp_path, retry_initial_s=0.01, retry_max_s=0.04,
                                 retry_deadline_s=0.3, receipt_timeout_s=5, poll_interval_s=0.01)


@pytest.fixture
def client(w3: Web3, ledger: LedgerSettings, service: LedgerServiceSettings) -> AnchorClient:
    return AnchorClient.connect(ledger, service, w3=w3)
