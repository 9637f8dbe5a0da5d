"""Scatter-gather bookkeeping for one search: the requests, the replies, the merged top k.

Pure: no Kafka and no asyncio, so the partial-result and merge rules test without a broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from shared.records import SearchHit, SearchReply, SearchRequest, encode_vector


@dataclass(frozen=True)
class SearchQuery:
    vector: np.ndarray  # L2-normalised query embedding
    model_id: str
    dim: int
    top_k: int
    since: float | None = None
    until: float | None = None
    domain: str | None = None
    source: str | None = None


def build_requests(
    query: SearchQuery, request_id: str, partitions: int, deadline: float,
) -> list[SearchRequest]:
    """One request per shard; each shard returns its own top k, so the merge is exact."""
    vector = encode_vector(query.vector)
    return [
        SearchRequest(
            request_id=request_id, partition=p, vector=vector, model_id=query.model_id,
            dim=query.dim, top_k=query.top_k, since=query.since, until=query.until,
            domain=query.domain, source=query.source, deadline=deadline,
        )
        for p in range(partitions)
    ]


@dataclass(frozen=True)
class GatherResult:
    hits: tuple[SearchHit, ...]
    answered: tuple[int, ...]  # shards that replied without an error
    missing: tuple[int, ...]  # shards with no reply by the deadline
    errors: Mapping[int, str] = field(default_factory=dict)  # shard -> the reason it gave

    @property
    def unanswered(self) -> tuple[int, ...]:
        """Shards whose results are not in `hits`: silent or failed."""
        return tuple(sorted({*self.missing, *self.errors}))

    @property
    def partial(self) -> bool:
        return bool(self.unanswered)


def merge_hits(replies: Iterable[SearchReply], top_k: int) -> tuple[SearchHit, ...]:
    """The top k across shards by score; a chunk seen twice keeps its best score."""
    best: dict[str, SearchHit] = {}
    for reply in replies:
        for hit in reply.hits:
            kept = best.get(hit.chunk_id)
            if kept is None or hit.score > kept.score:
                best[hit.chunk_id] = hit
    ranked = sorted(best.values(), key=lambda h: (-h.score, h.chunk_id))
    return tuple(ranked[:top_k])


class Gather:
    """The replies of one request as they arrive, first reply per shard wins."""

    def __init__(self, request_id: str, partitions: int) -> None:
        self.request_id = request_id
        self.expected = frozenset(range(partitions))
        self.replies: dict[int, SearchReply] = {}

    def add(self, reply: SearchReply) -> bool:
        """Record a reply; True once every shard has answered.

        Replies are at-least-once, so a repeat from a shard is ignored, and a reply for a
        shard this request never asked is ignored rather than trusted.
        """
        if reply.request_id == self.request_id and reply.partition in self.expected:
            self.replies.setdefault(reply.partition, reply)
        return self.complete

    @property
    def complete(self) -> bool:
        return len(self.replies) == len(self.expected)

    def result(self, top_k: int) -> GatherResult:
        ok = [r for r in self.replies.values() if not r.error]
        errors = {p: r.error for p, r in sorted(self.replies.items()) if r.error}
        return GatherResult(
            hits=merge_hits(ok, top_k),
            answered=tuple(sorted(r.partition for r in ok)),
            missing=tuple(sorted(self.expected - self.replies.keys())),
            errors=errors,
        )
