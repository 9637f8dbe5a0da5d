"""The ledger's errors, hung from the tree in shared.errors.

StreamragError
├── InvalidInput
│   └── AnchorConflict      the batch id is already anchored with another root
└── InfrastructureError
    └── LedgerError         the node or the contract failed us
        ├── LedgerUnavailable   node unreachable (or a tx unmined) past the retry deadline
        └── AnchorRejected      the contract reverted for a reason no retry can fix
"""

from __future__ import annotations

from shared.errors import InfrastructureError, InvalidInput


class AnchorConflict(InvalidInput):
    """A replayed batch whose root differs from the one on chain: the chain wins."""

    def __init__(self, batch_id: str, on_chain: str, offered: str) -> None:
        detail = f"batch {batch_id} is anchored with root {on_chain}, not {offered}"
        super().__init__("anchored_root_differs", "root", detail)


class LedgerError(InfrastructureError):
    """Root of the ledger's infrastructure failures."""


class LedgerUnavailable(LedgerError):
    """The node did not answer (or did not mine) within the retry deadline."""


class AnchorRejected(LedgerError):
    """The contract refused a transaction (wrong owner, empty root): retrying cannot help."""
