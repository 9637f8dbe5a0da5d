"""Retrieval agents: apply embedded chunks to the partition's shard; answer its searches."""

from __future__ import annotations

import logging
import time
from typing import Any

from services.retrieval.app import (
    app,
    dlq,
    embedded_topic,
    indexed_docs,
    replies_topic,
    requests_topic,
    settings,
)
from services.retrieval.index import Filters
from services.retrieval.shards import Shards
from shared.codec import decode, encode
from shared.dlq import send_dead_letter
from shared.errors import InvalidInput, ModelMismatchError
from shared.records import EmbeddedChunkSet, SearchReply, SearchRequest, decode_vector
from shared.topics import CHUNKS_EMBEDDED

log = logging.getLogger(__name__)
shards = Shards(settings, indexed_docs)


@app.on_partitions_revoked.connect
async def release(app: Any, revoked: set[Any], **kwargs: Any) -> None:
    shards.drop(tp.partition for tp in revoked if tp.topic == CHUNKS_EMBEDDED.name)


@app.agent(embedded_topic)
async def index(stream: Any) -> None:
    async for event in stream.events():
        partition = event.message.partition
        try:
            update = decode(EmbeddedChunkSet, event.value)
            applied = shards.get(partition).apply(update)
        except InvalidInput as exc:
            await send_dead_letter(dlq, "retrieval", exc, event.message)
            continue
        except ModelMismatchError as exc:
            err = InvalidInput("model_mismatch", "model_id", str(exc))
            await send_dead_letter(dlq, "retrieval", err, event.message)
            continue
        if not applied:
            continue
        if update.op == "delete":
            indexed_docs.pop(update.doc_id, None)
        else:
            indexed_docs[update.doc_id] = {"p": partition, "set": event.value.decode()}


@app.agent(requests_topic)
async def search(stream: Any) -> None:
    async for event in stream.events():
        try:
            req = decode(SearchRequest, event.value)
        except InvalidInput as exc:
            await send_dead_letter(dlq, "retrieval.search", exc, event.message)
            continue
        if time.time() > req.deadline:
            # Normal after a restart (old requests replay): the asker gave up already.
            log.debug("search %s for shard %d arrived past its deadline", req.request_id,
                      event.message.partition)
            continue
        await replies_topic.send(key=req.request_id.encode(), value=encode(
            answer(req, event.message.partition)))


def answer(req: SearchRequest, partition: int) -> SearchReply:
    shard = shards.get(partition)
    if req.model_id != shard.model_id or req.dim != shard.dim:
        return SearchReply(request_id=req.request_id, partition=partition,
                           shard_size=len(shard), error="model_mismatch")
    filters = Filters(since=req.since, until=req.until, domain=req.domain, source=req.source)
    hits = shard.search(decode_vector(req.vector), req.top_k, filters)
    return SearchReply(request_id=req.request_id, partition=partition, hits=tuple(hits),
                       shard_size=len(shard))
