# pragma version 0.4.3
"""
@title AuditAnchor
@notice Anchors the Merkle root of each streamrag audit batch, once per batch id.
@dev Batches are chained per partition through prev_root; ordering is not enforced
     here because Kafka already orders a partition, and a dev chain restarted without
     its state would otherwise refuse every later batch. batch_of_root lets a verifier
     walk a chain backwards from any root. signer is the address whose signature on
     the audit record the ledger service checked before anchoring it (the record's
     author, the redaction service's key), not the sender of this transaction.
"""

struct AnchorRecord:
    root: bytes32
    prev_root: bytes32
    leaf_count: uint256
    block_number: uint256
    signer: address

event Anchored:
    batch_id: indexed(bytes32)
    root: bytes32
    prev_root: bytes32
    leaf_count: uint256
    signer: indexed(address)

OWNER: public(immutable(address))
anchors: public(HashMap[bytes32, AnchorRecord])
batch_of_root: public(HashMap[bytes32, bytes32])
anchor_count: public(uint256)


@deploy
def __init__():
    OWNER = msg.sender


@external
def anchor(batch_id: bytes32, root: bytes32, prev_root: bytes32, leaf_count: uint256,
           signer: address):
    assert msg.sender == OWNER, "AuditAnchor: not owner"
    assert root != empty(bytes32), "AuditAnchor: empty root"
    assert signer != empty(address), "AuditAnchor: no signer"
    # block_number is never 0 for a stored anchor (genesis holds no transactions).
    assert self.anchors[batch_id].block_number == 0, "AuditAnchor: already anchored"
    self.anchors[batch_id] = AnchorRecord(
        root=root, prev_root=prev_root, leaf_count=leaf_count, block_number=block.number,
        signer=signer,
    )
    if self.batch_of_root[root] == empty(bytes32):
        self.batch_of_root[root] = batch_id
    self.anchor_count += 1
    log Anchored(
        batch_id=batch_id, root=root, prev_root=prev_root, leaf_count=leaf_count, signer=signer
    )
