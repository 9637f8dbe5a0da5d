"""Ledger agent: anchor each signed audit batch's Merkle root on chain, once, and announce it.

Only records signed by a known signer (STREAMRAG_AUDIT_SIGNERS) are anchored; the rest are
dead-lettered (bad_signature, unknown_signer), and so is a record that reuses an anchored
batch id with other values (anchored_<field>_differs).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn, TypeVar

from prometheus_client import Histogram

from services.ledger.anchors import AnchorReceipt
from services.ledger.app import anchored, anchors_topic, app, batches_topic, dlq, ledger, settings
from services.ledger.chain import AnchorClient
from services.ledger.errors import LedgerError, LedgerUnavailable
from services.ledger.reconcile import Checkpoint, recent, reconcile
from shared.contract.audit_signing import AuditSignerSettings, require_signed
from shared.contract.codec import decode, encode
from shared.contract.records import Anchor, AuditBatch
from shared.errors import InvalidInput
from shared.tracing import spans
from shared.worker.boundary import Boundary, export_counts

log = logging.getLogger(__name__)
T = TypeVar("T")
_client: AnchorClient | None = None
# The last reconciliation round's checkpoint: anchors it verified are not asked for again
# while the node keeps its block (services/ledger/reconcile.py).
_checkpoint: Checkpoint | None = None
_connecting = asyncio.Lock()  # one connect (and at most one deploy) per worker
KNOWN_SIGNERS = AuditSignerSettings().known()


def _stopping_already(exc: BaseException) -> None:
    """The ledger stops itself through `_fatal` (app.crash), as its tests expect."""


# Anchoring failures stop the worker (_fatal); the boundary handles the rest of a record.
boundary = Boundary("ledger", dlq, on_fatal=_stopping_already)
# The proof's delay: from redaction closing an audit batch to its root on chain.
ANCHOR_LATENCY = Histogram(
    "streamrag_ledger_anchor_latency_seconds",
    "Seconds from redaction closing an audit batch to its anchor transaction's receipt",
    buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600))
export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
              metrics_port=settings.metrics_port)


async def _until_available(fn: Callable[..., T], *args: Any) -> T:
    """Run blocking `fn` in a thread until the node answers.

    The client already backs off up to its deadline; past it we keep waiting rather than
    move on, because a skipped batch would be a hole in the audit trail, and anchoring
    again is harmless.
    """
    while True:
        try:
            return await asyncio.to_thread(fn, *args)
        except LedgerUnavailable as exc:
            log.error("ledger node unavailable, still retrying: %s", exc)


async def _ledger_client() -> AnchorClient:
    """The worker's one node connection; the first caller connects (and deploys if need be)."""
    global _client
    async with _connecting:
        if _client is None:
            _client = await _until_available(AnchorClient.connect, ledger, settings)
    return _client


async def _anchor(batch: AuditBatch) -> AnchorReceipt:
    return await anchor_root(batch.batch_id, batch.root, batch.prev_root, len(batch.leaves),
                             batch.signer)


async def anchor_root(batch_id: str, root: str, prev_root: str, leaf_count: int,
                      signer: str) -> AnchorReceipt:
    """Anchor one batch's root (documents' or queries'), waiting out a node that is down."""
    client = await _ledger_client()
    return await _until_available(partial(client.anchor, signer=signer),
                                  batch_id, root, prev_root, leaf_count)


async def announce(receipt: AnchorReceipt, batch_closed_at: float) -> Anchor:
    """The anchor on ledger.anchors.v1, acknowledged by the broker when this returns.

    The caller marks the batch done in the table only after: a kill between the two
    replays the batch, anchored again ("already on chain") and announced again. The other
    order lost announcements under kill -9: the table's changelog record went out at once,
    the announcement only with the offset commit, seconds later.
    """
    record = receipt.record(batch_closed_at=batch_closed_at)
    await (await anchors_topic.send(key=receipt.batch_id.encode(), value=encode(record),
                                    force=True))
    return record


def authentic(batch: AuditBatch) -> AuditBatch:
    """The batch, if a known signer signed it; else InvalidInput(bad_signature or
    unknown_signer): anyone who can write to the topic could have produced it."""
    return require_signed(batch, KNOWN_SIGNERS)


def _bare(root: str) -> str:
    return root.removeprefix("0x").lower() or "00" * 32


def replay_of(batch: AuditBatch, recorded: dict[str, Any]) -> bool:
    """True for a replay of the anchored batch; InvalidInput when it claims other values."""
    offered = {"root": _bare(batch.root), "prev_root": _bare(batch.prev_root),
               "leaf_count": len(batch.leaves), "signer": batch.signer.lower()}
    held = {"root": recorded["root"], "prev_root": recorded.get("prev_root"),
            "leaf_count": recorded.get("leaf_count"),
            "signer": (recorded.get("signer") or "").lower() or None}
    differ = [k for k in offered if held[k] is not None and held[k] != offered[k]]
    if differ:
        raise InvalidInput(f"anchored_{differ[0]}_differs", differ[0],
                           f"batch {batch.batch_id} is anchored already with other "
                           + ", ".join(differ))
    return True


async def _fatal(exc: Exception, context: str) -> NoReturn:
    """Stop the whole worker: an agent crash would be restarted past the batch, acking it."""
    log.critical("ledger cannot go on (%s), stopping the worker: %s", context, exc)
    await app.crash(exc)
    raise exc


@app.task
async def connect_ledger() -> None:
    """Connect at start, so a wrong key, chain or contract stops the worker before any batch."""
    try:
        await _ledger_client()
    except Exception as exc:  # re-raised by _fatal, never swallowed
        await _fatal(exc, "connecting")


@app.agent(batches_topic)
async def anchor_batches(stream: Any) -> None:
    """audit.batches.v1 -> on-chain anchor -> ledger.anchors.v1 keyed by batch id."""
    async for event in stream.events():
        async with boundary.record(event):
            await _anchor_one(event)


async def _anchor_one(event: Any) -> None:
    # InvalidInput (undecodable, unsigned, unknown signer): the boundary dead-letters it.
    batch = authentic(decode(AuditBatch, event.message.value))
    spans.annotate(batch_id=batch.batch_id, doc_count=batch.doc_count)
    if (done := anchored.get(batch.batch_id)) is not None and replay_of(batch, done):
        spans.outcome("deduplicated")
        return  # a replayed batch: the anchor was announced already
    started = time.monotonic()
    try:
        receipt = await _anchor(batch)
    except InvalidInput:
        raise
    except Exception as exc:  # re-raised by _fatal, never swallowed
        # A refused tx, a vanished contract, an RPC error: stop the worker, so the batch
        # is consumed again after the restart (anchoring twice is harmless).
        await _fatal(exc, f"anchoring {batch.batch_id}")
    record = await announce(receipt, batch.created_at)
    anchored[batch.batch_id] = record.model_dump(mode="json")
    if not receipt.already_anchored:
        ANCHOR_LATENCY.observe(max(0.0, record.anchored_at - batch.created_at))
    log.info("anchored %s tx=%s block=%d in %.0f ms, %.2f s after the batch closed%s",
             batch.batch_id, receipt.tx_hash, receipt.block_number,
             (time.monotonic() - started) * 1000, record.anchored_at - batch.created_at,
             " (already on chain)" if receipt.already_anchored else "")


@app.timer(settings.reconcile_interval_s)
async def reconcile_anchors() -> None:
    await reconcile_once()


async def reconcile_once() -> None:
    """Re-anchor recent batches the chain lost (a node restarted from an older state, a reorg).

    The table says "done" once an anchor is confirmed, so without this a lost anchor would
    never be written again. Timers cannot write tables in Faust 0.15, so the table keeps the
    first tx; the new one is announced on ledger.anchors.v1 (latest record per batch id wins).
    """
    if _client is None:
        return  # still connecting; nothing anchored by this worker yet
    due = recent(list(anchored.values()), time.time(), settings.reconcile_window_s,
                 settings.reconcile_max_batches)
    if not due:
        return
    global _checkpoint
    try:
        outcome = await asyncio.to_thread(reconcile, _client, due, _checkpoint)
    except LedgerError as exc:  # node down or a refusal: the next round tries again
        log.warning("reconciling %d recent anchors failed, retrying next round: %s",
                    len(due), exc)
        _checkpoint = None
        return
    _checkpoint = outcome.checkpoint
    closed = {a.batch_id: a.batch_closed_at for a in due}
    for receipt in outcome.reanchored:
        record = receipt.record(batch_closed_at=closed[receipt.batch_id])
        await anchors_topic.send(key=receipt.batch_id.encode(), value=encode(record))


# Query audits (audit.queries.v1) are batched and anchored by the same path; the agent lives
# in its own module and registers on this app when this module is imported.
from services.ledger import queries  # noqa: E402,F401
