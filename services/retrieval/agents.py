"""Retrieval agents: apply embedded chunks to the partition's shard; answer its searches.

Each applied upsert is also sampled for drift detection (services/retrieval/drift/agents.py,
whose agents this module's build registers too)."""

from __future__ import annotations

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
from shared.contract.topics import CHUNKS_EMBEDDED
from shared.errors import InvalidInput, ModelMismatchError
from shared.kafka import checkpoint
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker import local_search, members
from shared.worker.boundary import Boundary, export_counts
from shared.worker.status_files import MODELS_FILE, write_json
from shared.worker.topology import Topology

log = logging.getLogger(__name__)
# What build() wired this module's agents to: one topology per process.
app: faust.App
settings: RetrievalSettings
kafka: KafkaSettings
dlq: Any
replies_topic: Any
shards: Shards
digest_at: Any
index_boundary: Boundary
search_boundary: Boundary
index: Any  # the Faust agents
search: Any


def build(on: faust.App, retrieval: RetrievalSettings, kafka_settings: KafkaSettings,
          ) -> Topology:
    """Register retrieval's agents (index, search, drift), its rebalance hooks and timers,
    and its shards as the one-process mode's local search, on `on`."""
    global app, settings, kafka, dlq, replies_topic, shards, digest_at, index_boundary
    global search_boundary, index, search
    app, settings, kafka = on, retrieval, kafka_settings
    t = declare(app)
    dlq, replies_topic = t.dlq, t.replies
    shards = Shards(settings)
    digest_at = digest_reader(kafka, CHUNKS_EMBEDDED.name, digest)
    index_boundary = Boundary("retrieval", dlq)
    search_boundary = Boundary("retrieval.search", dlq)
    export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
                  metrics_port=settings.metrics_port)
    # One-process mode: inference on this worker searches the shards directly (local.py).
    local_search.register(LocalShards(
        shards, partial(answer, shards), lambda: app.rebalancing, _assigned_shards))
    # mode types a signal handler as taking any positionals; Faust sends these ones.
    app.on_partitions_revoked.connect(on_revoked)  # type: ignore[arg-type]
    app.on_rebalance_complete.connect(on_rebalanced)  # type: ignore[arg-type]
    app.on_before_shutdown.connect(on_shutdown)  # type: ignore[arg-type]
    app.timer(settings.snapshot_interval_s)(snapshot_shards)
    app.timer(2.0, name=f"{app.conf.id}.export_models")(export_models)
    index = app.agent(t.embedded, name=f"{__name__}.index")(index_updates)
    search = app.agent(t.requests, name=f"{__name__}.search")(answer_searches)
    drift.build(app, settings, t)
    return Topology("retrieval", app, settings, {"index": index, "search": search,
                                                 "judge": drift.judge})
# Produce-to-searchable, as a person waiting for a document sees it: from ingest reading
# the raw record (the document's ingest_time) to its version being in this shard's index.
FRESHNESS = Histogram(
    "streamrag_retrieval_freshness_seconds",
    "Seconds from ingest reading a document version to retrieval making it searchable",
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800))


def _assigned_shards() -> set[int]:
    """This worker's chunks.embedded.v1 partitions; none before its consumer has started
    (a process that imported this module without running the worker searches by broker)."""
    try:
        return {tp.partition for tp in app.consumer.assignment()
                if tp.topic == CHUNKS_EMBEDDED.name}
    except ConsumerNotStarted:
        return set()


async def on_revoked(app: Any, revoked: set[Any], **kwargs: Any) -> None:
    # The shard may move to another worker: leave it a snapshot to start from.
    await shards.save(tp.partition for tp in revoked if tp.topic == CHUNKS_EMBEDDED.name)


async def on_rebalanced(app: Any, **kwargs: Any) -> None:
    resume = await shards.assign(await end_offsets(app, CHUNKS_EMBEDDED.name), digest_at)
    await resume_at(app, CHUNKS_EMBEDDED.name, resume)
    log.info("shards %s resume at %s", sorted(resume), resume)


async def on_shutdown(app: Any, **kwargs: Any) -> None:
    await shards.save()


async def snapshot_shards() -> None:
    await shards.save()


async def export_models() -> None:
    """Write each model's index state for `streamrag status` (this worker's shards)."""
    write_json(members.own_file(settings.data_dir / app.conf.id, MODELS_FILE),
               {"at": time.time(), "models": shards.summary()})


async def index_updates(stream: Any) -> None:
    """chunks.embedded.v1 -> this worker's shards."""
    async for event in checkpoint.records(stream):
        msg = event.message
        position = shards.position.get(msg.partition)
        if position is None or msg.offset <= position[0]:
            continue  # a partition that moved away, or replay overlapping every snapshot
        async with index_boundary.record(event):
            update = decode(EmbeddedChunkSet, event.value)
            spans.annotate(doc_id=update.doc_id, version=update.version, shard=msg.partition)
            try:
                if shards.apply(msg.partition, msg.offset, update):
                    FRESHNESS.observe(max(0.0, time.time() - update.ingest_time))
                    await drift.sample(update)
            except ModelMismatchError as exc:  # an infrastructure error, but this record's
                raise InvalidInput("model_mismatch", "model_id", str(exc)) from exc
        shards.applied(msg.partition, msg.offset, msg.value)


async def answer_searches(stream: Any) -> None:
    """search.requests.v1 -> search.replies.v1, from the partition's shard."""
    async for event in checkpoint.records(stream):
        async with search_boundary.record(event):
            req = decode(SearchRequest, event.message.value)
            spans.annotate(request_id=req.request_id, shard=event.message.partition)
            if time.time() > req.deadline:
                spans.outcome("expired")
                # Normal after a restart (old requests replay): the asker gave up already.
                log.debug("search %s for shard %d arrived past its deadline", req.request_id,
                          event.message.partition)
                continue
            key = req.request_id.encode()
            reply = answer(shards, req, event.message.partition)
            value = reply_bytes(reply, key, kafka.max_record_bytes)
            await replies_topic.send(key=key, value=value)
