"""Ledger agent for query audits: batch audit.queries.v1 per partition, anchor each root.

A batch is the run of authentic query audits (signed by a known query signer,
STREAMRAG_AUDIT_QUERY_SIGNERS) of one partition in one micro-batch, named by its offsets
in its partition's epoch: `<epoch>/audit.queries.v1/<partition>/<first>-<last>`. Its
leaves are the records themselves, so the topic and the anchor alone prove each one
(shared/contract/query_audit.py); no batch record is written. Its roots chain per epoch
and partition (prev_root). The anchor names the records' signer, never a document
signer, so `streamrag audit verify` (documents) does not take it for one of its own.

At-least-once: a batch is done (shared/kafka/checkpoint.py, which alone commits) only after
its anchor is announced and marked in the anchored table; whatever stops a batch midway
(the node, the broker) escapes the agent and the worker exits with it not done
(shared/kafka/watchdog.py), so it replays. The chain's end per partition is rebuilt from that table
whenever a batch does not follow it (a restart, a rebalance), and audits up to it are
skipped, so a replay is not anchored again. Only a kill between the announcement and the
table write replays a batch the table does not know: the same offsets anchored again
("already on chain" when the batch comes out the same), each anchor proving the audit.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

import faust

from services.ledger.anchoring import Anchoring
from services.ledger.app import Topics
from services.ledger.errors import AnchorConflict
from services.ledger.settings import LedgerServiceSettings
from shared.batching.partitions import current_event
from shared.contract.audit_signing import AuditSignerSettings, require_signed
from shared.contract.codec import decode
from shared.contract.query_audit import (
    GENESIS_ROOT,
    Tip,
    batch_id_for,
    batch_root,
    runs,
    tip_from,
)
from shared.contract.records import QueryAudit
from shared.kafka import checkpoint

log = logging.getLogger(__name__)


class Chains:
    """Each partition's chain end, rebuilt from the anchored table whenever a batch does not
    start right after it (a start, a rebalance, a replay); a partition with no anchored
    query batch starts a chain in a fresh epoch."""

    def __init__(self, anchored: Any) -> None:
        self.anchored = anchored  # the table: batch id -> its Anchor (JSON)
        self.tips: dict[int, Tip] = {}

    def tip(self, partition: int, first_offset: int) -> Tip:
        tip = self.tips.get(partition)
        if tip is None or first_offset != tip.last_offset + 1:
            tip = (tip_from(self.anchored.items(), partition)
                   or Tip(secrets.token_hex(6), GENESIS_ROOT, -1))
            self.tips[partition] = tip
        return tip


class QueryAnchors:
    """The ledger stage's query-audit agent: its table, its signers, its chain ends."""

    def __init__(self, app: faust.App, settings: LedgerServiceSettings, topics: Topics,
                 anchoring: Anchoring) -> None:
        self.app, self.settings, self.topics, self.anchoring = app, settings, topics, anchoring
        self.anchored = topics.anchored  # the table: batch id -> its Anchor (JSON)
        self.known_signers = AuditSignerSettings().known_query()
        self.chains = Chains(self.anchored)
        self.anchor_queries: Any = None  # the Faust agent, once registered

    def register(self) -> Any:
        """Register the query-audit agent (the ledger's build calls it)."""
        self.anchor_queries = self.app.agent(
            self.topics.queries, name=f"{__name__}.anchor_queries")(self.anchor_query_batches)
        return self.anchor_queries

    def authentic_query(self, value: bytes) -> QueryAudit:
        """The audit, if a known query signer signed it; else InvalidInput (dead-lettered)."""
        return require_signed(decode(QueryAudit, value), self.known_signers)

    async def anchor_partition(self, stream: Any, partition: int,
                               events: list[Any]) -> list[str]:
        """Anchor one partition's part of a micro-batch; the batch ids anchored."""
        tip = self.chains.tip(partition, events[0].message.offset)
        fresh = [e for e in events if e.message.offset > tip.last_offset]
        if skipped := len(events) - len(fresh):
            log.info("partition %d: %d query audits up to offset %d are anchored already (a "
                     "redelivery): skipped", partition, skipped, tip.last_offset)
        valid: list[tuple[int, QueryAudit]] = []
        for event in fresh:
            async with self.anchoring.boundary.record(event):
                valid.append((event.message.offset, self.authentic_query(event.message.value)))
        done = []
        by_offset = {e.message.offset: e for e in fresh}
        for run in runs(valid):
            leaves = [a for _, a in run]
            batch_id = batch_id_for(tip.epoch, partition, run[0][0], run[-1][0])
            root = batch_root(leaves)
            try:
                receipt = await self.anchoring.anchor_root(batch_id, root, tip.root,
                                                           len(leaves), leaves[0].signer)
            except AnchorConflict as exc:
                # The same offsets (so the same leaves) anchored by another worker from
                # another chain end, in a rebalance race: its anchor and announcement stand.
                log.warning("query batch %s is anchored already with other values (%s): "
                            "left as the chain holds it", batch_id, exc.detail)
                tip = Tip(tip.epoch, root, run[-1][0])
                continue
            record = await self.anchoring.announce(receipt, max(a.at for a in leaves))
            with current_event(stream, by_offset[run[-1][0]]):
                self.anchored[batch_id] = record.model_dump(mode="json")
            tip = Tip(tip.epoch, root, run[-1][0])
            done.append(batch_id)
            log.info("anchored query batch %s: %d audits, root %s, tx %s", batch_id,
                     len(leaves), root[:16], receipt.tx_hash)
        if fresh:  # dead-lettered audits after the last run are consumed too
            tip = Tip(tip.epoch, tip.root, fresh[-1].message.offset)
        self.chains.tips[partition] = tip
        return done

    async def anchor_query_batches(self, stream: Any) -> None:
        """audit.queries.v1 -> one anchored root per partition's run -> ledger.anchors.v1."""
        async for groups in checkpoint.batches(stream, self.settings.query_batch_max,
                                               self.settings.query_batch_within_s):
            for partition, events in groups.items():
                await self.anchor_partition(stream, partition, events)
