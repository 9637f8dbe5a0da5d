"""Reconciliation: find recent anchors the chain no longer holds, and anchor them again."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from services.ledger.anchors import AnchorReceipt
from shared.errors import InvalidInput
from shared.records import Anchor

log = logging.getLogger(__name__)


class Chain(Protocol):
    """The part of AnchorClient reconciliation uses (blocking)."""

    def is_anchored(self, batch_id: str) -> bool: ...

    def anchor(self, batch_id: str, root_hex: str, prev_root_hex: str,
               leaf_count: int, *, signer: str) -> AnchorReceipt: ...


@dataclass
class Outcome:
    checked: int = 0
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


def reconcile(chain: Chain, anchors: Iterable[Anchor]) -> Outcome:
    """Re-anchor each of `anchors` the chain no longer holds; the rest are left alone.

    Safe to run twice or beside the agent: the contract refuses a second anchor of a batch
    id, and AnchorClient.anchor turns that refusal into the existing anchor. Node outages
    (LedgerUnavailable) and refusals (AnchorRejected) propagate: the caller tries next round.
    """
    outcome = Outcome()
    for anchor in anchors:
        outcome.checked += 1
        if chain.is_anchored(anchor.batch_id):
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
    return outcome
