"""What an anchor is on chain: its receipt, and how batch ids and roots become bytes32."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from shared.contract.records import Anchor
from shared.errors import InvalidInput

ZERO = bytes(32)


@dataclass(frozen=True)
class AnchorReceipt:
    """An anchor as the chain holds it; already_anchored means an earlier call wrote it."""

    batch_id: str
    root: str  # bare lowercase hex, as AuditBatch spells roots
    prev_root: str
    leaf_count: int
    tx_hash: str
    block_number: int
    contract: str
    chain_id: int
    anchored_at: float  # wall clock once confirmed; for a read-back, the block's timestamp
    already_anchored: bool = False
    signer: str = ""  # checksummed address of the audit record's signer

    def record(self, batch_closed_at: float) -> Anchor:
        return Anchor(batch_id=self.batch_id, root=self.root, tx_hash=self.tx_hash,
                      block_number=self.block_number, contract=self.contract,
                      chain_id=self.chain_id, anchored_at=self.anchored_at,
                      batch_closed_at=batch_closed_at, prev_root=self.prev_root,
                      leaf_count=self.leaf_count, signer=self.signer)


@dataclass(frozen=True)
class Stored:
    """The fields of an anchor the contract stores (besides its block)."""

    root: bytes
    prev_root: bytes
    leaf_count: int
    signer: str  # checksummed address

    def differences(self, offered: Stored) -> dict[str, tuple[str, str]]:
        """{field: (on chain, offered)} for every field that differs, as text."""
        mine, theirs = self.as_text(), offered.as_text()
        return {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}

    def as_text(self) -> dict[str, str]:
        return {"root": self.root.hex(), "prev_root": self.prev_root.hex(),
                "leaf_count": str(self.leaf_count), "signer": self.signer.lower()}


def batch_key(batch_id: str) -> bytes:
    """Batch ids are free-form strings; the contract keys anchors by their sha256."""
    return hashlib.sha256(batch_id.encode("utf-8")).digest()


def hex32(value: str, field: str) -> bytes:
    """32 bytes from hex with or without 0x; '' is the zero root (a chain's first batch)."""
    text = value.removeprefix("0x")
    try:
        raw = bytes.fromhex(text)
    except ValueError as exc:
        raise InvalidInput("not_hex", field, f"{len(text)} characters, not hex") from exc
    if raw and len(raw) != 32:
        raise InvalidInput("not_32_bytes", field, f"{len(raw)} bytes")
    return raw or ZERO
