"""RFC 6962 Merkle trees and inclusion proofs: shared/contract/merkle.py, which the ledger's
query-audit batches use too (services do not import each other)."""

from shared.contract.merkle import inclusion_proof, leaf_hash, node_hash, root, verify_inclusion

__all__ = ["inclusion_proof", "leaf_hash", "node_hash", "root", "verify_inclusion"]
