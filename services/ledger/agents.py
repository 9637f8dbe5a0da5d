"""Ledger agent: anchor each signed audit batch's Merkle root on chain, once, and announce it.

The stage is one object, `Ledger`, with its node connection (`Anchoring`) and query-audit
agent (`QueryAnchors`) as fields; nothing lives at module level but constants.

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

from services.ledger.anchoring import Anchoring
from services.ledger.app import declare
from services.ledger.errors import LedgerError

# Query audits (audit.queries.v1) are batched and anchored by the same path; their agent
# lives in its own module, registered by the stage's register below.
from services.ledger.queries import QueryAnchors
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


# The proof's delay: from redaction closing an audit batch to its root on chain.
ANCHOR_LATENCY = Histogram(
    "streamrag_ledger_anchor_latency_seconds",
    "Seconds from redaction closing an audit batch to its anchor transaction's receipt",
    buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600))


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


class Ledger:
    """One ledger stage on one app: its anchored table, signers, node connection
    (Anchoring), query-audit agent (QueryAnchors) and reconciliation checkpoint."""

    def __init__(self, app: faust.App, settings: LedgerServiceSettings,
                 kafka: KafkaSettings) -> None:
        self.app, self.settings, self.kafka = app, settings, kafka
        t = declare(app)
        self.topics = t
        self.anchored, self.anchors_topic = t.anchored, t.anchors
        self.known_signers = AuditSignerSettings().known()
        self.anchoring = Anchoring(app, settings, LedgerSettings(), t)
        self.queries = QueryAnchors(app, settings, t, self.anchoring)
        # The last reconciliation round's checkpoint: anchors it verified are not asked for
        # again while the node keeps its block (services/ledger/reconcile.py).
        self.checkpoint: Checkpoint | None = None
        self.anchor_batches: Any = None  # the Faust agent, once registered

    def register(self) -> Topology:
        """Register the agents (document batches, query audits), the node connection task
        and the reconciliation timer."""
        app, settings = self.app, self.settings
        export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                      metrics_port=settings.metrics_port)
        app.task(self.connect_ledger)
        self.anchor_batches = app.agent(self.topics.batches,
                                        name=f"{__name__}.anchor_batches")(self.anchor_each)
        app.timer(settings.reconcile_interval_s)(self.reconcile_anchors)
        anchor_queries = self.queries.register()
        return Topology("ledger", app, settings, {"anchor_batches": self.anchor_batches,
                                                  "anchor_queries": anchor_queries}, self)

    def authentic(self, batch: AuditBatch) -> AuditBatch:
        """The batch, if a known signer signed it; else InvalidInput(bad_signature or
        unknown_signer): anyone who can write to the topic could have produced it."""
        return require_signed(batch, self.known_signers)

    async def connect_ledger(self) -> None:
        """Connect at start, so a wrong key, chain or contract stops the worker before any
        batch."""
        try:
            await self.anchoring.ledger_client()
        except Exception as exc:  # re-raised by fatal, never swallowed
            await self.anchoring.fatal(exc, "connecting")

    async def anchor_each(self, stream: Any) -> None:
        """audit.batches.v1 -> on-chain anchor -> ledger.anchors.v1 keyed by batch id."""
        async for event in checkpoint.records(stream):
            async with self.anchoring.boundary.record(event):
                await self._anchor_one(event)

    async def _anchor_one(self, event: Any) -> None:
        # InvalidInput (undecodable, unsigned, unknown signer): the boundary dead-letters it.
        batch = self.authentic(decode(AuditBatch, event.message.value))
        spans.annotate(batch_id=batch.batch_id, doc_count=batch.doc_count)
        if (done := self.anchored.get(batch.batch_id)) is not None and replay_of(batch, done):
            spans.outcome("deduplicated")
            return  # a replayed batch: the anchor was announced already
        started = time.monotonic()
        try:
            receipt = await self.anchoring.anchor_root(
                batch.batch_id, batch.root, batch.prev_root, len(batch.leaves), batch.signer)
        except InvalidInput:
            raise
        except Exception as exc:  # re-raised by fatal, never swallowed
            # A refused tx, a vanished contract, an RPC error: stop the worker, so the batch
            # is consumed again after the restart (anchoring twice is harmless).
            await self.anchoring.fatal(exc, f"anchoring {batch.batch_id}")
        record = await self.anchoring.announce(receipt, batch.created_at)
        self.anchored[batch.batch_id] = record.model_dump(mode="json")
        if not receipt.already_anchored:
            ANCHOR_LATENCY.observe(max(0.0, record.anchored_at - batch.created_at))
        log.info("anchored %s tx=%s block=%d in %.0f ms, %.2f s after the batch closed%s",
                 batch.batch_id, receipt.tx_hash, receipt.block_number,
                 (time.monotonic() - started) * 1000, record.anchored_at - batch.created_at,
                 " (already on chain)" if receipt.already_anchored else "")

    async def reconcile_anchors(self) -> None:
        await self.reconcile_once()

    async def reconcile_once(self) -> None:
        """Re-anchor recent batches the chain lost (a node restarted from an older state, a
        reorg).

        The table says "done" once an anchor is confirmed, so without this a lost anchor
        would never be written again. Timers cannot write tables in Faust 0.15, so the table
        keeps the first tx; the new one is announced on ledger.anchors.v1 (latest record per
        batch id wins).
        """
        client = self.anchoring.connected()
        if client is None:
            return  # still connecting; nothing anchored by this worker yet
        due = recent(list(self.anchored.values()), time.time(),
                     self.settings.reconcile_window_s, self.settings.reconcile_max_batches)
        if not due:
            return
        try:
            outcome = await asyncio.to_thread(reconcile, client, due, self.checkpoint)
        except LedgerError as exc:  # node down or a refusal: the next round tries again
            log.warning("reconciling %d recent anchors failed, retrying next round: %s",
                        len(due), exc)
            self.checkpoint = None
            return
        self.checkpoint = outcome.checkpoint
        closed = {a.batch_id: a.batch_closed_at for a in due}
        for receipt in outcome.reanchored:
            record = receipt.record(batch_closed_at=closed[receipt.batch_id])
            await self.anchors_topic.send(key=receipt.batch_id.encode(), value=encode(record))


def build(on: faust.App, service: LedgerServiceSettings, kafka: KafkaSettings) -> Topology:
    """Build a ledger stage on `on` and register its agents (document batches, query
    audits), its node connection task and its reconciliation timer."""
    return Ledger(on, service, kafka).register()
