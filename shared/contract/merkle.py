"""RFC 6962 Merkle trees (leaf = H(0x00 || d), node = H(0x01 || l || r)) and inclusion proofs.

Shared by every audit trail: redaction's document batches and the ledger's query batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root(leaves: Sequence[bytes]) -> bytes:
    """The Merkle Tree Hash of already-hashed leaves (RFC 6962 section 2.1)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node_hash(root(leaves[:k]), root(leaves[k:]))


def _split(n: int) -> int:
    """The largest power of two smaller than n."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path PATH(m, D[n]) for leaf `index` (RFC 6962 section 2.1.1), leaf first."""
    if not 0 <= index < len(leaves):
        raise IndexError(f"leaf {index} of a tree with {len(leaves)} leaves")
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*inclusion_proof(leaves[:k], index), root(leaves[k:])]
    return [*inclusion_proof(leaves[k:], index - k), root(leaves[:k])]


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes],
                     expected_root: bytes) -> bool:
    """Whether `proof` puts hashed `leaf` at `index` of a tree of `size` with this root.

    The iterative check of RFC 9162 section 2.1.3.2, independent of how the proof was built.
    """
    if not 0 <= index < size:
        return False
    fn, sn, node = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            node = node_hash(node, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and node == expected_root
