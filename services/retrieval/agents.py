"""Retrieval agents: apply embedded chunks to the partition's shard; answer its searches.

Each applied upsert is also sampled for drift detection (services/retrieval/drift/agents.py,
whose agents this module registers by importing it)."""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from faust.exceptions import ConsumerNotStarted
from prometheus_client import Histogram

from services.retrieval.app import (
    app,
    dlq,
    embedded_topic,
    kafka,
    replies_topic,
    requests_topic,
    settings,
)
from services.retrieval.drift import agents as drift
from services.retrieval.local import LocalShards
from services.retrieval.positions import digest_reader, end_offsets, resume_at
from services.retrieval.search import answer, reply_bytes
from services.retrieval.shards import Shards, digest
from shared.contract.codec import decode
from shared.contract.records import EmbeddedChunkSet, SearchRequest
from shared.contract.topics import CHUNKS_EMBEDDED
from shared.errors import InvalidInput, ModelMismatchError
from shared.kafka import checkpoint
from shared.tracing import spans
from shared.worker import local_search, members
from shared.worker.boundary import Boundary, export_counts
from shared.worker.status_files import MODELS_FILE, write_json

log = logging.getLogger(__name__)
shards = Shards(settings)
digest_at = digest_reader(kafka, CHUNKS_EMBEDDED.name, digest)
index_boundary = Boundary("retrieval", dlq)
search_boundary = Boundary("retrieval.search", dlq)
export_counts(app, settings.data_dir, metrics_host=settings.metrics_host,
              metrics_port=settings.metrics_port)
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


# One-process mode: inference on this worker searches the shards directly (local.py).
local_search.register(LocalShards(
    shards, partial(answer, shards), lambda: app.rebalancing, _assigned_shards))


# mode types a signal handler as taking any positionals; Faust sends these ones.
@app.on_partitions_revoked.connect  # type: ignore[arg-type]
async def on_revoked(app: Any, revoked: set[Any], **kwargs: Any) -> None:
    # The shard may move to another worker: leave it a snapshot to start from.
    await shards.save(tp.partition for tp in revoked if tp.topic == CHUNKS_EMBEDDED.name)


@app.on_rebalance_complete.connect  # type: ignore[arg-type]
async def on_rebalanced(app: Any, **kwargs: Any) -> None:
    resume = await shards.assign(await end_offsets(app, CHUNKS_EMBEDDED.name), digest_at)
    await resume_at(app, CHUNKS_EMBEDDED.name, resume)
    log.info("shards %s resume at %s", sorted(resume), resume)


@app.on_before_shutdown.connect  # type: ignore[arg-type]
async def on_shutdown(app: Any, **kwargs: Any) -> None:
    await shards.save()


@app.timer(settings.snapshot_interval_s)
async def snapshot_shards() -> None:
    await shards.save()


@app.timer(2.0, name=f"{app.conf.id}.export_models")
async def export_models() -> None:
    """Write each model's index state for `streamrag status` (this worker's shards)."""
    write_json(members.own_file(settings.data_dir / app.conf.id, MODELS_FILE),
               {"at": time.time(), "models": shards.summary()})


@app.agent(embedded_topic)
async def index(stream: Any) -> None:
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


@app.agent(requests_topic)
async def search(stream: Any) -> None:
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
