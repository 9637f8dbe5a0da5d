"""Ledger agent: anchor each signed audit batch's Merkle root on chain, once, and announce it.

Only records signed by a known signer (STREAMRAG_AUDIT_SIGNERS) are anchored; the rest are
dead-lettered (bad_signature, unknown_signer), and so is a record that reuses an anchored
batch id with other values (anchored_<field>_differs).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import faust
from prometheus_client import Histogram

# Query audits (audit.queries.v1) are batched and anchored by the same path; their agent
# lives in its own module, registered by build() below.
from services.ledger import anchoring, queries
from services.ledger.anchoring import (
    anchor_root,
    announce,
    connected,
    fatal,
    ledger_client,
)
from services.ledger.anchors import AnchorReceipt
from services.ledger.app import declare
from services.ledger.errors import LedgerError
from services.ledger.reconcile import Checkpoint, recent, reconcile
from services.ledger.settings import LedgerServiceSettings
from shared.contract.audit_signing import AuditSignerSettings, require_signed
from shared.contract.codec import decode, encode
from shared.contract.records import AuditBatch
from shared.errors import InvalidInput
from shared.kafka import checkpoint
from shared.settings import KafkaSettings, LedgerSettings
from shared.tracing import spans
from shared.worker.boundary import export_counts
from shared.worker.topology import Topology

log = logging.getLogger(__name__)
# The last reconciliation round's checkpoint: anchors it verified are not asked for again
# while the node keeps its block (services/ledger/reconcile.py).
_checkpoint: Checkpoint | None = None
# What build() wired this module's agents to: one topology per process.
app: faust.App
settings: LedgerServiceSettings
anchored: Any  # the table: batch id -> its Anchor (JSON)
anchors_topic: Any
KNOWN_SIGNERS: Any  # AuditSignerSettings().known(), read at build
anchor_batches: Any  # the Faust agent


# The proof's delay: from redaction closing an audit batch to its root on chain.
ANCHOR_LATENCY = Histogram(
    "streamrag_ledger_anchor_latency_seconds",
    "Seconds from redaction closing an audit batch to its anchor transaction's receipt",
    buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600))


def build(on: faust.App, service: LedgerServiceSettings, kafka: KafkaSettings) -> Topology:
    """Register the ledger's agents (document batches, query audits), its node connection
    task and its reconciliation timer on `on`."""
    global app, settings, anchored, anchors_topic, KNOWN_SIGNERS, anchor_batches, _checkpoint
    app, settings, t = on, service, declare(on)
    anchored, anchors_topic = t.anchored, t.anchors
    KNOWN_SIGNERS = AuditSignerSettings().known()
    _checkpoint = None
    anchoring.build(app, settings, LedgerSettings(), t)
    export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                  metrics_port=settings.metrics_port)
    app.task(connect_ledger)
    anchor_batches = app.agent(t.batches, name=f"{__name__}.anchor_batches")(anchor_each)
    app.timer(settings.reconcile_interval_s)(reconcile_anchors)
    queries.build(app, settings, t)
    return Topology("ledger", app, settings, {"anchor_batches": anchor_batches,
                                              "anchor_queries": queries.anchor_queries})


async def _anchor(batch: AuditBatch) -> AnchorReceipt:
    return await anchor_root(batch.batch_id, batch.root, batch.prev_root, len(batch.leaves),
                             batch.signer)


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


async def connect_ledger() -> None:
    """Connect at start, so a wrong key, chain or contract stops the worker before any batch."""
    try:
        await ledger_client()
    except Exception as exc:  # re-raised by _fatal, never swallowed
        await fatal(exc, "connecting")


async def anchor_each(stream: Any) -> None:
    """audit.batches.v1 -> on-chain anchor -> ledger.anchors.v1 keyed by batch id."""
    async for event in checkpoint.records(stream):
        async with anchoring.boundary.record(event):
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
        await fatal(exc, f"anchoring {batch.batch_id}")
    record = await announce(receipt, batch.created_at)
    anchored[batch.batch_id] = record.model_dump(mode="json")
    if not receipt.already_anchored:
        ANCHOR_LATENCY.observe(max(0.0, record.anchored_at - batch.created_at))
    log.info("anchored %s tx=%s block=%d in %.0f ms, %.2f s after the batch closed%s",
             batch.batch_id, receipt.tx_hash, receipt.block_number,
             (time.monotonic() - started) * 1000, record.anchored_at - batch.created_at,
             " (already on chain)" if receipt.already_anchored else "")


async def reconcile_anchors() -> None:
    await reconcile_once()


async def reconcile_once() -> None:
    """Re-anchor recent batches the chain lost (a node restarted from an older state, a reorg).

    The table says "done" once an anchor is confirmed, so without this a lost anchor would
    never be written again. Timers cannot write tables in Faust 0.15, so the table keeps the
    first tx; the new one is announced on ledger.anchors.v1 (latest record per batch id wins).
    """
    client = connected()
    if client is None:
        return  # still connecting; nothing anchored by this worker yet
    due = recent(list(anchored.values()), time.time(), settings.reconcile_window_s,
                 settings.reconcile_max_batches)
    if not due:
        return
    global _checkpoint
    try:
        outcome = await asyncio.to_thread(reconcile, client, due, _checkpoint)
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

