"""Find the AuditAnchor contract on the node, or deploy it once and remember where."""

from __future__ import annotations

import hashlib
import json
import logging
from contextlib import suppress
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from eth_typing import HexStr
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import (
    BadFunctionCallOutput,
    BlockNotFound,
    ContractLogicError,
    TransactionNotFound,
)

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
    # Kept for the record only: anvil reloading its state file can report another genesis
    # block than the one it had (docs/design/audit-trail.md), so it cannot tell chains apart.
    genesis_hash: str
    address: str
    # sha256 of the bytecode deployed: a contract built from another source (an older
    # version of AuditAnchor) is not reused.
    code_sha256: str = ""
    # The deployment's transaction and the hash of the block that mined it: a fresh dev
    # chain replays the same key's deployment at the same address with the same tx hash,
    # but in a block with another hash. "" in records written before they were kept.
    tx_hash: str = ""
    block_hash: str = ""


@dataclass(frozen=True)
class Seen:
    """What the node holds of a recorded deployment."""

    chain_id: int
    code: bytes  # at the recorded address
    expected_code: bytes  # the artifact's runtime code as deployed by the contract's owner
    receipt: tuple[str, str] | None  # the deployment tx's (contract address, block hash)
    has_block: bool  # the node has a block with the recorded block hash


def artifact_code_sha256() -> str:
    return hashlib.sha256(artifact()["bytecode"].encode("ascii")).hexdigest()


def record_path(data_dir: Path) -> Path:
    return data_dir / "ledger" / "contract.json"


def read_record(path: Path) -> Deployment | None:
    """The record; fields it lacks take their defaults and fields it has that this version
    does not know are left out, so records of older and newer versions load."""
    try:
        data = json.loads(path.read_text())
        return Deployment(**{f.name: data[f.name] for f in fields(Deployment) if f.name in data})
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        log.warning("ignoring unreadable %s (%s); deploying afresh", path, exc)
        return None


def write_record(path: Path, deployment: Deployment) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # atomic, a unique temporary name: a crash never leaves half a record
    replace_file(path, json.dumps(asdict(deployment), indent=2) + "\n")


def another_chain(known: Deployment, seen: Seen) -> str:
    """Why the node is not the chain `known` was deployed on; "" when it is.

    Chain id, then the contract itself: the recorded address must hold exactly the
    artifact's runtime code. Then the deployment: where the node has its transaction, the
    receipt must name the address and the recorded block; where it has not (a node that
    dropped its transaction index), the recorded block must be there. Not the genesis hash:
    anvil restarted from its state file may report another one (docs/design/audit-trail.md).
    A record without the deployment (older versions) is judged on chain id and code alone.
    """
    if seen.chain_id != known.chain_id:
        return f"chain id {seen.chain_id}, not {known.chain_id}"
    if not seen.code:
        return f"no contract at {known.address}"
    if seen.code != seen.expected_code:
        return f"{known.address} holds other code than AuditAnchor's"
    if not known.tx_hash:
        return ""
    if seen.receipt is not None:
        address, block_hash = seen.receipt
        if address.lower() != known.address.lower():
            return f"deployment tx {known.tx_hash} created {address or 'nothing'}"
        if block_hash != known.block_hash:
            return f"deployment tx {known.tx_hash} is in block {block_hash}, not {known.block_hash}"
        return ""
    if not seen.has_block:
        return f"neither deployment tx {known.tx_hash} nor its block {known.block_hash} is there"
    return ""


def genesis_hash(w3: Web3) -> str:
    return w3.eth.get_block(0)["hash"].to_0x_hex()


def at(w3: Web3, address: str) -> Contract:
    return w3.eth.contract(address=Web3.to_checksum_address(address), abi=artifact()["abi"])


def runtime_code(w3: Web3, owner: str) -> bytes:
    """The code the artifact's constructor leaves when `owner` deploys it (OWNER is an
    immutable, part of the code), from a call that runs the constructor without a tx."""
    return bytes(w3.eth.call({"from": owner, "data": artifact()["bytecode"]}))


def seen(w3: Web3, known: Deployment) -> Seen:
    """Ask the node about `known`'s deployment."""
    address = Web3.to_checksum_address(known.address)
    code, expected = bytes(w3.eth.get_code(address)), b""
    receipt, has_block = None, False
    with suppress(BadFunctionCallOutput, ContractLogicError):  # not AuditAnchor: no OWNER
        if code:
            expected = runtime_code(w3, at(w3, address).functions.OWNER().call())
    with suppress(TransactionNotFound):
        if known.tx_hash:
            r = w3.eth.get_transaction_receipt(HexStr(known.tx_hash))
            receipt = (str(r["contractAddress"] or ""), r["blockHash"].to_0x_hex())
    with suppress(BlockNotFound):
        if known.block_hash and receipt is None:
            has_block = bool(w3.eth.get_block(HexStr(known.block_hash)))
    return Seen(w3.eth.chain_id, code, expected, receipt, has_block)


def configured(w3: Web3, address: str) -> Contract:
    """STREAMRAG_LEDGER_CONTRACT_ADDRESS, checked to hold a contract."""
    if not Web3.is_address(address):
        raise ConfigError(f"STREAMRAG_LEDGER_CONTRACT_ADDRESS {address!r} is not an address")
    if not w3.eth.get_code(Web3.to_checksum_address(address)):
        raise ConfigError(f"STREAMRAG_LEDGER_CONTRACT_ADDRESS {address} holds no contract on "
                          "this chain")
    return at(w3, address)


def resolve_contract(w3: Web3, sender: Sender, ledger: LedgerSettings, data_dir: Path) -> Contract:
    """The configured contract, else the recorded one if it is still on this chain, else a new one.

    Deploying is safe to repeat: a deploy whose record was lost only costs gas.
    """
    if ledger.contract_address:
        return configured(w3, ledger.contract_address)
    path = record_path(data_dir)
    known = read_record(path)
    if known and known.code_sha256 != artifact_code_sha256():
        log.warning("the AuditAnchor at %s recorded in %s was built from another source; "
                    "deploying the current one", known.address, path)
    elif known:
        why = another_chain(known, seen(w3, known))
        if not why:
            log.info("reusing AuditAnchor at %s (chain %d)", known.address, known.chain_id)
            return at(w3, known.address)
        log.warning("the node at %s is another chain than the one AuditAnchor was recorded "
                    "on in %s (recorded: chain %d, contract %s, deployed in block %s; this "
                    "one: chain %d, genesis %s): %s; deploying afresh", ledger.rpc_url, path,
                    known.chain_id, known.address, known.block_hash or "not recorded",
                    w3.eth.chain_id, genesis_hash(w3), why)
    return deploy(w3, sender, path)


def deploy(w3: Web3, sender: Sender, path: Path) -> Contract:
    """A new AuditAnchor, recorded at `path` with the chain and the deployment."""
    factory = w3.eth.contract(abi=artifact()["abi"], bytecode=artifact()["bytecode"])
    receipt = sender.send(factory.constructor())
    if receipt["status"] != 1 or not receipt["contractAddress"]:
        raise AnchorRejected(f"deploying AuditAnchor failed: tx {receipt['transactionHash']!r}")
    address, chain_id = str(receipt["contractAddress"]), w3.eth.chain_id
    write_record(path, Deployment(chain_id, genesis_hash(w3), address, artifact_code_sha256(),
                                  receipt["transactionHash"].to_0x_hex(),
                                  receipt["blockHash"].to_0x_hex()))
    log.info("deployed AuditAnchor at %s (chain %d), recorded in %s", address, chain_id, path)
    return at(w3, address)
