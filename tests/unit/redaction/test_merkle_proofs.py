"""RFC 6962 inclusion proofs: the published vectors, and every leaf of random trees."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.contract import merkle
from tests.unit.redaction.rfc6962 import INPUTS

LEAVES = [merkle.leaf_hash(x) for x in INPUTS]
# (leaf index, tree size, path) from the certificate-transparency reference tests.
VECTORS = [
    (0, 1, []),
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]


@pytest.mark.parametrize(("index", "size", "path"), VECTORS)
def test_reference_inclusion_proofs(index: int, size: int, path: list[str]) -> None:
    proof = merkle.inclusion_proof(LEAVES[:size], index)
    assert [p.hex() for p in proof] == path
    assert merkle.verify_inclusion(LEAVES[index], index, size, proof,
                                   merkle.root(LEAVES[:size]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=8), min_size=1, max_size=40), st.data())
def test_every_leaf_proves_and_no_tampered_proof_does(data: list[bytes],
                                                      draw: st.DataObject) -> None:
    leaves = [merkle.leaf_hash(d) for d in data]
    size, top = len(leaves), merkle.root(leaves)
    for i, leaf in enumerate(leaves):
        assert merkle.verify_inclusion(leaf, i, size, merkle.inclusion_proof(leaves, i), top)
    i = draw.draw(st.integers(0, size - 1))
    proof = merkle.inclusion_proof(leaves, i)
    other = merkle.leaf_hash(b"not in the tree")
    assert not merkle.verify_inclusion(other, i, size, proof, top)
    assert not merkle.verify_inclusion(leaves[i], i, size, proof + [other], top)
    if proof:
        j = draw.draw(st.integers(0, len(proof) - 1))
        bad = [*proof[:j], other, *proof[j + 1:]]
        assert not merkle.verify_inclusion(leaves[i], i, size, bad, top)
        assert not merkle.verify_inclusion(leaves[i], i, size, proof[:-1], top)
    if size > 1 and leaves[i] != leaves[(i + 1) % size]:
        assert not merkle.verify_inclusion(leaves[i], (i + 1) % size, size, proof, top)


def test_index_outside_the_tree() -> None:
    with pytest.raises(IndexError):
        merkle.inclusion_proof(LEAVES[:3], 3)
    assert not merkle.verify_inclusion(LEAVES[0], 3, 3, [], merkle.root(LEAVES[:3]))
