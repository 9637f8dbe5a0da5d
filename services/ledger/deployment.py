"""Find the AuditAnchor contract on the node, or deploy it once and remember where."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from web3 import Web3
from web3.contract import Contract

from services.ledger.errors import AnchorRejected
from services.ledger.transactions import Sender
from shared.errors import ConfigError
from shared.settings import LedgerSettings
from shared.worker.status_files import replace_file

log = logging.getLogger(__name__)
ARTIFACT = Path(__file__).parent / "contract" / "AuditAnchor.json"


@cache
def artifact() -> dict[str, Any]:
    """The committed ABI and bytecode (scripts/compile_contract regenerates them)."""
    data: dict[str, Any] = json.loads(ARTIFACT.read_text())
    return data


@dataclass(frozen=True)
class Deployment:
    """Where this service deployed the contract, and on which chain."""

    chain_id: int
    genesis_hash: str
    address: str
    # sha256 of the bytecode deployed: a contract built from another source (an older
    # version of AuditAnchor) is not reused.
    code_sha256: str = ""


def artifact_code_sha256() -> str:
    return hashlib.sha256(artifact()["bytecode"].encode("ascii")).hexdigest()


def record_path(data_dir: Path) -> Path:
    return data_dir / "ledger" / "contract.json"


def read_record(path: Path) -> Deployment | None:
    try:
        return Deployment(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        log.warning("ignoring unreadable %s (%s); deploying afresh", path, exc)
        return None


def write_record(path: Path, deployment: Deployment) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # atomic, a unique temporary name: a crash never leaves half a record
    replace_file(path, json.dumps(asdict(deployment), indent=2) + "\n")


def chain_identity(w3: Web3) -> tuple[int, str]:
    """Chain id alone cannot tell two dev chains apart; their genesis blocks differ."""
    return w3.eth.chain_id, w3.eth.get_block(0)["hash"].to_0x_hex()


def at(w3: Web3, address: str) -> Contract:
    return w3.eth.contract(address=Web3.to_checksum_address(address), abi=artifact()["abi"])


def resolve_contract(w3: Web3, sender: Sender, ledger: LedgerSettings, data_dir: Path) -> Contract:
    """The configured contract, else the recorded one if it is still on this chain, else a new one.

    Deploying is safe to repeat: a deploy whose record was lost only costs gas.
    """
    if ledger.contract_address:
        if not Web3.is_address(ledger.contract_address):
            raise ConfigError(f"STREAMRAG_LEDGER_CONTRACT_ADDRESS {ledger.contract_address!r} "
                              "is not an address")
        if not w3.eth.get_code(Web3.to_checksum_address(ledger.contract_address)):
            raise ConfigError(f"STREAMRAG_LEDGER_CONTRACT_ADDRESS {ledger.contract_address} "
                              "holds no contract on this chain")
        return at(w3, ledger.contract_address)
    chain_id, genesis = chain_identity(w3)
    path = record_path(data_dir)
    known = read_record(path)
    if known and (known.chain_id, known.genesis_hash, known.code_sha256) == (
            chain_id, genesis, artifact_code_sha256()) \
            and w3.eth.get_code(Web3.to_checksum_address(known.address)):
        log.info("reusing AuditAnchor at %s (chain %d)", known.address, chain_id)
        return at(w3, known.address)
    factory = w3.eth.contract(abi=artifact()["abi"], bytecode=artifact()["bytecode"])
    receipt = sender.send(factory.constructor())
    if receipt["status"] != 1 or not receipt["contractAddress"]:
        raise AnchorRejected(f"deploying AuditAnchor failed: tx {receipt['transactionHash']!r}")
    address = str(receipt["contractAddress"])
    write_record(path, Deployment(chain_id, genesis, address, artifact_code_sha256()))
    log.info("deployed AuditAnchor at %s (chain %d), recorded in %s", address, chain_id, path)
    return at(w3, address)
