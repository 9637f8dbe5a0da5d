"""The ledger's errors, hung from the tree in shared.errors.

StreamragError
├── InvalidInput
│   └── AnchorConflict      the batch id is already anchored with another root, prev_root,
│                           leaf count or signer
└── InfrastructureError
    └── LedgerError         the node or the contract failed us
        ├── LedgerUnavailable   node unreachable (or a tx unmined) past the retry deadline
        └── AnchorRejected      the contract reverted for a reason no retry can fix
"""

from __future__ import annotations

from shared.errors import InfrastructureError, InvalidInput


class AnchorConflict(InvalidInput):
    """A batch id already anchored with other values: the chain wins.

    The reason names the first differing field (anchored_root_differs,
    anchored_prev_root_differs, ...); the detail names every one, with both values.
    """

    def __init__(self, batch_id: str, differ: dict[str, tuple[str, str]]) -> None:
        first = next(iter(differ))
        detail = f"batch {batch_id} is anchored with " + ", ".join(
            f"{name} {chain}, not {offered}" for name, (chain, offered) in differ.items())
        super().__init__(f"anchored_{first}_differs", first, detail)
        self.fields = tuple(differ)


class LedgerError(InfrastructureError):
    """Root of the ledger's infrastructure failures."""


class LedgerUnavailable(LedgerError):
    """The node did not answer (or did not mine) within the retry deadline."""


class AnchorRejected(LedgerError):
    """The contract refused a transaction (wrong owner, empty root): retrying cannot help."""
