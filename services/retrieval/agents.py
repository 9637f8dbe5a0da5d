"""Retrieval agents: apply embedded chunks to the partition's shard; answer its searches;
expire text past its retention.

The stage is one object, `Retrieval`, built with its settings, topics, shards and
boundaries; its methods are the agents, hooks and timers `build` registers. Each applied
upsert is also sampled for drift detection (services/retrieval/drift/agents.py, whose
`Drift` object the stage builds beside itself). Nothing lives at module level but metrics."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from functools import partial
from typing import Any

import faust
from faust.exceptions import ConsumerNotStarted
from prometheus_client import Histogram

from services.retrieval.app import declare
from services.retrieval.drift import agents as drift
from services.retrieval.local import LocalShards
from services.retrieval.positions import digest_reader, end_offsets, resume_at
from services.retrieval.search import answer, reply_bytes
from services.retrieval.settings import RetrievalSettings
from services.retrieval.shards import Shards, digest
from shared.contract.codec import decode
from shared.contract.records import EmbeddedChunkSet, SearchRequest
from shared.contract.sealed import (
    Forgotten,
    KeyUnavailable,
    as_delete,
    key_unavailable,
    open_chunks,
)
from shared.contract.topics import CHUNKS_EMBEDDED
from shared.errors import InvalidInput, ModelMismatchError
from shared.kafka import checkpoint
from shared.keys.settings import KeySettings
from shared.keys.store import Destroyed, VersionKeys
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker import local_search, members
from shared.worker.boundary import Boundary, export_counts
from shared.worker.status_files import MODELS_FILE, write_json
from shared.worker.topology import Topology

log = logging.getLogger(__name__)
# Produce-to-searchable, as a person waiting for a document sees it: from ingest reading
# the raw record (the document's ingest_time) to its version being in this shard's index.
FRESHNESS = Histogram(
    "streamrag_retrieval_freshness_seconds",
    "Seconds from ingest reading a document version to retrieval making it searchable",
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800))




class Retrieval:
    """One retrieval stage on one app: the shards this worker owns and what feeds them."""

    def __init__(self, app: faust.App, settings: RetrievalSettings, kafka: KafkaSettings,
                 ) -> None:
        self.app, self.settings, self.kafka = app, settings, kafka
        t = declare(app)
        self.topics = t
        self.dlq, self.replies_topic = t.dlq, t.replies
        self.shards = Shards(settings)
        self.key_settings = KeySettings()
        self.digest_at = digest_reader(kafka, CHUNKS_EMBEDDED.name, digest)
        self.index_boundary = Boundary("retrieval", t.dlq)
        self.search_boundary = Boundary("retrieval.search", t.dlq)
        self.drift = drift.Drift(app, settings, t)
        self.index: Any = None  # the Faust agents, once registered
        self.search: Any = None

    def register(self) -> Topology:
        """Register the agents, rebalance hooks and timers on the app."""
        app, settings = self.app, self.settings
        export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                      metrics_port=settings.metrics_port)
        # One-process mode: inference on this worker searches the shards directly (local.py).
        local_search.register(LocalShards(
            self.shards, partial(answer, self.shards), lambda: app.rebalancing,
            self.assigned_shards))
        # mode types a signal handler as taking any positionals; Faust sends these ones.
        app.on_partitions_revoked.connect(self.on_revoked)  # type: ignore[arg-type]
        app.on_rebalance_complete.connect(self.on_rebalanced)  # type: ignore[arg-type]
        app.on_before_shutdown.connect(self.on_shutdown)  # type: ignore[arg-type]
        app.timer(settings.snapshot_interval_s, name=f"{app.conf.id}.snapshot_shards")(
            self.snapshot_shards)
        app.timer(2.0, name=f"{app.conf.id}.export_models")(self.export_models)
        if settings.text_kept_s is not None:
            app.timer(settings.expire_every_s, name=f"{app.conf.id}.expire_text")(
                self.expire_text)
        self.index = app.agent(self.topics.embedded, name=f"{__name__}.index")(
            self.index_updates)
        self.search = app.agent(self.topics.requests, name=f"{__name__}.search")(
            self.answer_searches)
        judge = self.drift.register()
        return Topology("retrieval", app, settings, {"index": self.index, "search": self.search,
                                                     "judge": judge}, self)

    def assigned_shards(self) -> set[int]:
        """This worker's chunks.embedded.v1 partitions; none before its consumer has started
        (a process that imported this module without running the worker searches by
        broker)."""
        try:
            return {tp.partition for tp in self.app.consumer.assignment()
                    if tp.topic == CHUNKS_EMBEDDED.name}
        except ConsumerNotStarted:
            return set()

    async def on_revoked(self, app: Any, revoked: set[Any], **kwargs: Any) -> None:
        # The shard may move to another worker: leave it a snapshot to start from.
        await self.shards.save(tp.partition for tp in revoked
                               if tp.topic == CHUNKS_EMBEDDED.name)

    async def on_rebalanced(self, app: Any, **kwargs: Any) -> None:
        resume = await self.shards.assign(await end_offsets(app, CHUNKS_EMBEDDED.name),
                                          self.digest_at)
        await resume_at(app, CHUNKS_EMBEDDED.name, resume)
        log.info("shards %s resume at %s", sorted(resume), resume)
        await self.drop_forgotten()

    async def drop_forgotten(self) -> int:
        """Remove from the loaded shards every version whose data key was destroyed (a
        snapshot from before a forget: a restored backup), and rewrite their snapshots."""
        # The key store is asked off the event loop; the shards change on it.
        held = self.shards.held()
        gone = await asyncio.to_thread(lambda: {dv for dv in held if self._destroyed(*dv)})
        removed = self.shards.forget(lambda d, v: (d, v) in gone) if gone else 0
        if removed:
            saved = await self.shards.save()
            log.info("%d forgotten documents dropped from the loaded shards, %d snapshots "
                     "rewritten", removed, len(saved))
        return removed

    def _destroyed(self, doc_id: str, version: int) -> bool:
        return isinstance(self.keys.get(doc_id, version), Destroyed)

    async def on_shutdown(self, app: Any, **kwargs: Any) -> None:
        await self.shards.save()

    async def snapshot_shards(self) -> None:
        await self.shards.save()

    async def expire_text(self) -> None:  # a timer: Faust passes the app to one with args
        await self.expire_text_at(time.time())

    async def expire_text_at(self, now: float) -> int:
        """Remove the documents ingested longer ago than the text retention from the
        shards, then rewrite their snapshots at once, so no file keeps the text either."""
        kept = self.settings.text_kept_s
        if kept is None:
            return 0
        removed = self.shards.expire(now - kept)
        if removed:
            saved = await self.shards.save()
            log.info("text retention: %d documents expired from the shards, %d snapshots "
                     "rewritten", removed, len(saved))
        return removed

    async def export_models(self) -> None:
        """Write each model's index state for `streamrag status` (this worker's shards)."""
        write_json(members.own_file(self.settings.data_dir / self.app.conf.id, MODELS_FILE),
                   {"at": time.time(), "models": self.shards.summary()})

    @functools.cached_property
    def keys(self) -> VersionKeys:
        """The data-key store, opened at the first sealed chunk set."""
        return VersionKeys.from_settings(self.key_settings)

    def opened(self, update: EmbeddedChunkSet) -> EmbeddedChunkSet:
        """The set in clear; a forgotten version's (its key destroyed, here or before a
        restore) as its delete, so no replay nor restored backup brings it back."""
        try:
            return open_chunks(update, self.keys)
        except Forgotten:
            return as_delete(update)
        except KeyUnavailable as exc:
            raise key_unavailable(update.doc_id, update.version) from exc

    async def index_updates(self, stream: Any) -> None:
        """chunks.embedded.v1 -> this worker's shards."""
        shards = self.shards
        async for event in checkpoint.records(stream):
            msg = event.message
            position = shards.position.get(msg.partition)
            if position is None or msg.offset <= position[0]:
                continue  # a partition that moved away, or replay overlapping every snapshot
            async with self.index_boundary.record(event):
                update = self.opened(decode(EmbeddedChunkSet, event.value))
                spans.annotate(doc_id=update.doc_id, version=update.version,
                               shard=msg.partition)
                try:
                    if shards.apply(msg.partition, msg.offset, update):
                        FRESHNESS.observe(max(0.0, time.time() - update.ingest_time))
                        await self.drift.sample(update)
                except ModelMismatchError as exc:  # an infrastructure error, but this record's
                    raise InvalidInput("model_mismatch", "model_id", str(exc)) from exc
            shards.applied(msg.partition, msg.offset, msg.value)

    async def answer_searches(self, stream: Any) -> None:
        """search.requests.v1 -> search.replies.v1, from the partition's shard."""
        async for event in checkpoint.records(stream):
            async with self.search_boundary.record(event):
                req = decode(SearchRequest, event.message.value)
                spans.annotate(request_id=req.request_id, shard=event.message.partition)
                if time.time() > req.deadline:
                    spans.outcome("expired")
                    # Normal after a restart (old requests replay): the asker gave up already.
                    log.debug("search %s for shard %d arrived past its deadline",
                              req.request_id, event.message.partition)
                    continue
                key = req.request_id.encode()
                reply = answer(self.shards, req, event.message.partition)
                value = reply_bytes(reply, key, self.kafka.max_record_bytes)
                await self.replies_topic.send(key=key, value=value)


def build(on: faust.App, retrieval: RetrievalSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Build a retrieval stage on `on` and register its agents, hooks and timers (and its
    shards as the one-process mode's local search)."""
    return Retrieval(on, retrieval, kafka_settings).register()
