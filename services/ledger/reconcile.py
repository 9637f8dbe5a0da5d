"""Reconciliation: find recent anchors the chain no longer holds, and anchor them again."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from services.ledger.anchors import AnchorReceipt
from shared.contract.records import Anchor
from shared.errors import InvalidInput

log = logging.getLogger(__name__)


class Chain(Protocol):
    """The part of AnchorClient reconciliation uses (blocking)."""

    def anchored_block(self, batch_id: str) -> int: ...

    def head(self) -> tuple[int, str]: ...

    def block_hash(self, number: int) -> str | None: ...

    def anchor(self, batch_id: str, root_hex: str, prev_root_hex: str,
               leaf_count: int, *, signer: str) -> AnchorReceipt: ...


@dataclass(frozen=True)
class Checkpoint:
    """A block seen at the end of a round, and the anchors verified in blocks at or below it.

    While the node still has this block (the same hash at its height), every block at or
    below it is unchanged (each block commits to its parent's hash), so every anchor
    written there still stands: the next round need not ask for them again.
    """

    number: int
    hash: str
    verified: frozenset[str]


@dataclass
class Outcome:
    checked: int = 0
    skipped: int = 0  # verified in an earlier round, below a block the chain still has
    checkpoint: Checkpoint | None = None  # the next round's (None: check everything)
    reanchored: list[AnchorReceipt] = field(default_factory=list)
    # Lost from the chain but not re-anchorable: recorded before prev_root/leaf_count were
    # kept, or the chain now holds another root for the id (AnchorConflict).
    unrecoverable: list[str] = field(default_factory=list)


def recent(values: Iterable[Mapping[str, Any] | Anchor], now: float, window_s: float,
           limit: int) -> list[Anchor]:
    """The anchors confirmed in the last `window_s` seconds, at most `limit` (the newest),
    oldest first so re-anchors land in the order of the batch chain.

    A node restarted from its state file loses its last seconds, and a reorg only reaches
    a few blocks back: older anchors need no re-checking, and the window bounds the RPC load.
    """
    anchors = [v if isinstance(v, Anchor) else Anchor.model_validate(v) for v in values]
    fresh = sorted((a for a in anchors if a.anchored_at >= now - window_s),
                   key=lambda a: (a.anchored_at, a.batch_id), reverse=True)[:limit]
    return fresh[::-1]


def reconcile(chain: Chain, anchors: Iterable[Anchor],
              checkpoint: Checkpoint | None = None) -> Outcome:
    """Re-anchor each of `anchors` the chain no longer holds; the rest are left alone.

    Safe to run twice or beside the agent: the contract refuses a second anchor of a batch
    id, and AnchorClient.anchor turns that refusal into the existing anchor. Node outages
    (LedgerUnavailable) and refusals (AnchorRejected) propagate: the caller tries next round.

    `checkpoint`: the previous round's. If the node still has its block, the anchors it
    verified are not asked for again (one RPC instead of one per anchor: under a burst a
    round re-read up to 256 anchors every 10 s). If it lost the block (a restart from an
    older state, a reorg), every anchor is checked. Outcome.checkpoint is the next round's:
    the head taken before the checks, with the anchors found in blocks at or below it, kept
    only if that head is still the node's block after the checks.
    """
    outcome = Outcome()
    anchors = list(anchors)
    head_number, head_hash = chain.head()
    intact = (checkpoint is not None
              and chain.block_hash(checkpoint.number) == checkpoint.hash)
    known = checkpoint.verified if intact and checkpoint is not None else frozenset()
    verified = {a.batch_id for a in anchors if a.batch_id in known}
    for anchor in anchors:
        if anchor.batch_id in known:
            outcome.skipped += 1
            continue
        outcome.checked += 1
        block = chain.anchored_block(anchor.batch_id)
        if block:
            if block <= head_number:
                verified.add(anchor.batch_id)
            continue
        if anchor.prev_root is None or anchor.leaf_count is None or not anchor.signer:
            log.error("anchor of %s is gone from the chain and was recorded without its "
                      "prev_root/leaf_count/signer: cannot re-anchor it", anchor.batch_id)
            outcome.unrecoverable.append(anchor.batch_id)
            continue
        try:
            receipt = chain.anchor(anchor.batch_id, anchor.root, anchor.prev_root,
                                   anchor.leaf_count, signer=anchor.signer)
        except InvalidInput as exc:  # AnchorConflict: someone anchored another root
            log.error("cannot re-anchor %s: %s", anchor.batch_id, exc)
            outcome.unrecoverable.append(anchor.batch_id)
            continue
        log.warning("anchor of %s was gone from the chain (node restart or reorg); "
                    "re-anchored in tx %s block %d", anchor.batch_id, receipt.tx_hash,
                    receipt.block_number)
        outcome.reanchored.append(receipt)
    if chain.block_hash(head_number) == head_hash:  # no reorg under the head meanwhile
        outcome.checkpoint = Checkpoint(head_number, head_hash, frozenset(verified))
    return outcome
