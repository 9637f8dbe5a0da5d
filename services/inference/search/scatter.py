"""The scatter side of a search: one query's parameters, and the requests a batch of them
sends, one per retrieval shard.

Pure: no Kafka and no asyncio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from services.inference.search.fusion import Fusion
from shared.contract.access import Access
from shared.contract.records import SearchRequest, SearchSpec, encode_vector


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
    # Hybrid search: the question for the shards' BM25, and how to fuse ("": dense only).
    text: str = ""
    fusion: Fusion | None = None
    # What the caller may read; every shard applies it inside its filter mask. Required
    # (keyword): a search that forgot its caller must not be possible.
    access: Access = field(kw_only=True)


def build_requests(
    queries: Sequence[tuple[str, SearchQuery]], request_id: str, partitions: int,
    deadline: float,
) -> list[SearchRequest]:
    """One request per shard carrying every query of the batch; each shard returns each
    query's own top k, so the merge is exact. All queries must share model and dimension."""
    first = queries[0][1]
    if any((q.model_id, q.dim) != (first.model_id, first.dim) for _, q in queries):
        raise ValueError("one search batch must use one model and dimension")
    specs = tuple(
        SearchSpec(query_id=query_id, vector=encode_vector(q.vector), top_k=q.top_k,
                   since=q.since, until=q.until, domain=q.domain, source=q.source,
                   text=q.text, groups=tuple(sorted(q.access.grants)),
                   all_access=q.access.all_access)
        for query_id, q in queries
    )
    return [
        SearchRequest(request_id=request_id, partition=p, model_id=first.model_id,
                      dim=first.dim, deadline=deadline, queries=specs)
        for p in range(partitions)
    ]
