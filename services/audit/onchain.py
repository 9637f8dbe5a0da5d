"""Every anchor the AuditAnchor contract holds for the deployment's signers, read from its
Anchored events, so `audit verify` can hold the topics to the chain and not only the
other way round.

The contract keys anchors by sha256 of the batch id; the id itself is not on chain, so an
anchor is named by the audit record or announcement whose id hashes to its key, else by
the key alone. Which contracts: `--contract`, STREAMRAG_LEDGER_CONTRACT_ADDRESS, the
ledger's deployment record (`<STREAMRAG_DATA_DIR>/ledger/contract.json`, the
embedded default's), and every contract an announcement on ledger.anchors.v1 names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from web3 import Web3

from services.audit.documents.verify import ChainAnchor

log = logging.getLogger(__name__)

# The one view of services/ledger's AuditAnchor the auditors need (a unit test keeps it
# equal to the committed ABI); anchors are keyed by sha256 of the batch id.
ANCHORS_ABI = [{"inputs": [{"name": "arg0", "type": "bytes32"}], "name": "anchors",
                "outputs": [{"components": [
                    {"name": "root", "type": "bytes32"}, {"name": "prev_root", "type": "bytes32"},
                    {"name": "leaf_count", "type": "uint256"},
                    {"name": "block_number", "type": "uint256"},
                    {"name": "signer", "type": "address"}], "name": "", "type": "tuple"}],
                "stateMutability": "view", "type": "function"}]

# The Anchored event of services/ledger's AuditAnchor (a unit test keeps it equal to the
# committed ABI): batch_id and signer are indexed.
ANCHORED_ABI = {"anonymous": False, "inputs": [
    {"indexed": True, "name": "batch_id", "type": "bytes32"},
    {"indexed": False, "name": "root", "type": "bytes32"},
    {"indexed": False, "name": "prev_root", "type": "bytes32"},
    {"indexed": False, "name": "leaf_count", "type": "uint256"},
    {"indexed": True, "name": "signer", "type": "address"}], "name": "Anchored", "type": "event"}
BLOCKS_PER_QUERY = 50_000  # eth_getLogs ranges: public nodes refuse very wide ones


def recorded_contract(data_dir: Path) -> str:
    """The address in the ledger service's deployment record under `data_dir` (the
    process's STREAMRAG_DATA_DIR, which the ledger shares in the embedded mesh and in its
    container); "" when there is none. Services do not import each other, so the path is
    spelled here as in services/ledger/deployment.py."""
    path = data_dir / "ledger" / "contract.json"
    try:
        address = json.loads(path.read_text()).get("address", "")
    except (OSError, ValueError, AttributeError):
        return ""
    return address if isinstance(address, str) else ""


def contracts_to_read(*candidates: str) -> list[str]:
    """The distinct addresses among `candidates`, checksummed, in order; blanks dropped."""
    out: list[str] = []
    for c in candidates:
        if c and Web3.is_address(c) and Web3.to_checksum_address(c) not in out:
            out.append(Web3.to_checksum_address(c))
    return out


def read_anchors(w3: Web3, contracts: Iterable[str], signers: frozenset[str],
                 step: int = BLOCKS_PER_QUERY) -> list[ChainAnchor]:
    """Every anchor of the `signers` (lower-case addresses) on `contracts`, oldest first."""
    head = w3.eth.block_number
    out: list[ChainAnchor] = []
    for address in contracts:
        if not w3.eth.get_code(Web3.to_checksum_address(address)):
            log.warning("no contract at %s on this chain: its anchors cannot be read", address)
            continue
        event = w3.eth.contract(address=Web3.to_checksum_address(address),
                                abi=[ANCHORED_ABI]).events.Anchored
        for start in range(0, head + 1, step):
            for e in event.get_logs(from_block=start, to_block=min(head, start + step - 1)):
                if (a := _anchor(e, address)).signer.lower() in signers:
                    out.append(a)
    return sorted(out, key=lambda a: (a.block_number, a.key))


def _anchor(event: Any, contract: str) -> ChainAnchor:
    args = event["args"]
    return ChainAnchor(bytes(args["batch_id"]).hex(), bytes(args["root"]).hex(),
                       bytes(args["prev_root"]).hex(), int(args["leaf_count"]),
                       str(args["signer"]), int(event["blockNumber"]),
                       "0x" + bytes(event["transactionHash"]).hex(), contract)
