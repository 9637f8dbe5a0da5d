"""Retrieval agents: apply embedded chunks to the partition's shard; answer its searches."""

from __future__ import annotations

import binascii
import logging
import time
from typing import Any

import numpy as np
from faust.exceptions import ConsumerNotStarted

from services.retrieval.app import (
    app,
    dlq,
    embedded_topic,
    kafka,
    replies_topic,
    requests_topic,
    settings,
)
from services.retrieval.index import Filters, Shard
from services.retrieval.local import LocalShards
from services.retrieval.positions import digest_reader, end_offsets, resume_at
from services.retrieval.shards import Shards, digest
from shared.contract import sizes
from shared.contract.codec import decode, encode
from shared.contract.records import (
    EmbeddedChunkSet,
    QueryHits,
    SearchReply,
    SearchRequest,
    SearchSpec,
    decode_vector,
)
from shared.contract.topics import CHUNKS_EMBEDDED
from shared.errors import InvalidInput, ModelMismatchError
from shared.worker import local_search
from shared.worker.boundary import Boundary, export_counts
from shared.worker.status_files import MODELS_FILE, write_json

log = logging.getLogger(__name__)
shards = Shards(settings)
digest_at = digest_reader(kafka, CHUNKS_EMBEDDED.name, digest)
index_boundary = Boundary("retrieval", dlq)
search_boundary = Boundary("retrieval.search", dlq)
export_counts(app, settings.data_dir)
# One-process mode: inference on this worker searches the shards directly (local.py).
def _assigned_shards() -> set[int]:
    """This worker's chunks.embedded.v1 partitions; none before its consumer has started
    (a process that imported this module without running the worker searches by broker)."""
    try:
        return {tp.partition for tp in app.consumer.assignment()
                if tp.topic == CHUNKS_EMBEDDED.name}
    except ConsumerNotStarted:
        return set()


local_search.register(LocalShards(
    shards, lambda req, p: answer(req, p), lambda: app.rebalancing, _assigned_shards))


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
    write_json(settings.data_dir / app.conf.id / MODELS_FILE,
               {"at": time.time(), "models": shards.summary()})


@app.agent(embedded_topic)
async def index(stream: Any) -> None:
    async for event in stream.events():
        msg = event.message
        position = shards.position.get(msg.partition)
        if position is None or msg.offset <= position[0]:
            continue  # a partition that moved away, or replay overlapping every snapshot
        async with index_boundary.record(event):
            update = decode(EmbeddedChunkSet, event.value)
            try:
                shards.apply(msg.partition, msg.offset, update)
            except ModelMismatchError as exc:  # an infrastructure error, but this record's
                raise InvalidInput("model_mismatch", "model_id", str(exc)) from exc
        shards.applied(msg.partition, msg.offset, msg.value)


@app.agent(requests_topic)
async def search(stream: Any) -> None:
    async for event in stream.events():
        async with search_boundary.record(event):
            req = decode(SearchRequest, event.message.value)
            if time.time() > req.deadline:
                # Normal after a restart (old requests replay): the asker gave up already.
                log.debug("search %s for shard %d arrived past its deadline", req.request_id,
                          event.message.partition)
                continue
            key = req.request_id.encode()
            await replies_topic.send(key=key, value=reply_bytes(
                answer(req, event.message.partition), key))


def reply_bytes(reply: SearchReply, key: bytes) -> bytes:
    """The reply as a record; one over the record limit (up to 256 queries of 1,000 hits
    with their text) answers `reply_too_large` instead, which the asker reports per shard."""
    value = encode(reply)
    if sizes.fits(value, key, kafka.max_record_bytes):
        return value
    log.warning("search %s: reply of %d bytes is over the record limit", reply.request_id,
                len(value))
    return encode(SearchReply(request_id=reply.request_id, partition=reply.partition,
                              shard_size=reply.shard_size, error="reply_too_large"))


def answer(req: SearchRequest, partition: int) -> SearchReply:
    """This shard's top k for every query of the batch, from the index of the request's model.

    A model this worker does not index (or another dimension) answers model_mismatch,
    unless no model has a document on the partition (then nothing, as for any model); a
    model whose index has not caught up with the others here answers catching_up, since
    its partial results would look complete to the asker (inference keeps asking the old
    model until every shard of the new one has caught up: services/inference/switch.py).
    """
    if not shards.ready(partition):
        # Still replaying its partition: a partial answer would look complete to the asker.
        return SearchReply(request_id=req.request_id, partition=partition, error="recovering")
    shard = shards.get(req.model_id, partition)
    if shard is None and shards.empty(partition):
        # No model has a document here (a fresh mesh, or a partition no document hashed
        # to): every model's answer is the empty one, known here or not yet.
        return SearchReply(request_id=req.request_id, partition=partition,
                           results=tuple(QueryHits(query_id=q.query_id) for q in req.queries))
    if shard is None or req.dim != shard.dim:
        return SearchReply(request_id=req.request_id, partition=partition,
                           error="model_mismatch")
    if not shards.caught_up(req.model_id, partition):
        return SearchReply(request_id=req.request_id, partition=partition,
                           shard_size=len(shard), error="catching_up")
    return SearchReply(request_id=req.request_id, partition=partition,
                       results=tuple(search_one(shard, q) for q in req.queries),
                       shard_size=len(shard))


def search_one(shard: Shard, spec: SearchSpec) -> QueryHits:
    try:
        vector = decode_vector(spec.vector)
    except (ValueError, binascii.Error):
        return QueryHits(query_id=spec.query_id, error="invalid_vector")
    if vector.shape != (shard.dim,) or not np.isfinite(vector).all():
        return QueryHits(query_id=spec.query_id, error="invalid_vector")
    filters = Filters(since=spec.since, until=spec.until, domain=spec.domain,
                      source=spec.source)
    return QueryHits(query_id=spec.query_id,
                     hits=tuple(shard.search(vector, spec.top_k, filters, spec.text)))
