"""What a shard does with a SearchRequest: pick the model's index, search it, build the reply.

Pure: no Kafka. The search agent (agents.py) and one-process mode's in-process path
(local.py) both answer through `answer`, so filters, freshness and errors are the same.
"""

from __future__ import annotations

import binascii
import logging

import numpy as np

from services.retrieval.index import Filters, Shard
from services.retrieval.shards import Shards
from shared.contract import sizes
from shared.contract.access import Access
from shared.contract.codec import encode
from shared.contract.records import (
    QueryHits,
    SearchReply,
    SearchRequest,
    SearchSpec,
    decode_vector,
)

log = logging.getLogger(__name__)


def answer(shards: Shards, req: SearchRequest, partition: int) -> SearchReply:
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
                           shard_size=shard_size(shard, req), error="catching_up")
    return SearchReply(request_id=req.request_id, partition=partition,
                       results=tuple(search_one(shard, q) for q in req.queries),
                       shard_size=shard_size(shard, req))


def access_of(spec: SearchSpec) -> Access:
    """The asker's access exactly as the request states it (its grants are not widened)."""
    return Access(frozenset(spec.groups), spec.all_access)


def shard_size(shard: Shard, req: SearchRequest) -> int:
    """The chunks here that every query of the batch may read: the whole shard for
    all-access askers, never a count that includes a chunk one of the askers may not read."""
    accesses = {access_of(q) for q in req.queries}
    if all(a.all_access for a in accesses):
        return len(shard)
    masks = [shard.columns.access_mask(a) for a in accesses]
    return int(np.logical_and.reduce(masks).sum())


def search_one(shard: Shard, spec: SearchSpec) -> QueryHits:
    """One query's hits, or `invalid_vector` for a vector that is not the shard's size or
    not finite."""
    try:
        vector = decode_vector(spec.vector)
    except (ValueError, binascii.Error):
        return QueryHits(query_id=spec.query_id, error="invalid_vector")
    if vector.shape != (shard.dim,) or not np.isfinite(vector).all():
        return QueryHits(query_id=spec.query_id, error="invalid_vector")
    filters = Filters(since=spec.since, until=spec.until, domain=spec.domain,
                      source=spec.source, access=access_of(spec))
    return QueryHits(query_id=spec.query_id,
                     hits=tuple(shard.search(vector, spec.top_k, filters, spec.text)))


def reply_bytes(reply: SearchReply, key: bytes, max_record_bytes: int) -> bytes:
    """The reply as a record; one over the record limit (up to 256 queries of 1,000 hits
    with their text) answers `reply_too_large` instead, which the asker reports per shard."""
    value = encode(reply)
    if sizes.fits(value, key, max_record_bytes):
        return value
    log.warning("search %s: reply of %d bytes is over the record limit", reply.request_id,
                len(value))
    return encode(SearchReply(request_id=reply.request_id, partition=reply.partition,
                              shard_size=reply.shard_size, error="reply_too_large"))
