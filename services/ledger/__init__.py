"""The ledger service: anchors each audit batch's Merkle root on an Ethereum chain."""
