"""Hybrid ranking: the shards' dense and BM25 candidates fused into one order.

Every candidate carries both its inner product (`score`) and its BM25 (`lexical`; 0 when
no question word matches), and every shard sent its dense top k and its BM25 top k, so
the ranks taken over the merged candidates are the global ranks down to k. Two methods:
reciprocal rank fusion (Cormack et al. 2009: sum of weight / (k + rank) over the lists
a chunk is ranked in) and normalised score fusion: the inner product as it is (already
bounded and comparable between questions) plus BM25 divided by the best BM25 among the
candidates (BM25 is unbounded), each weighted. Min-max scaling the inner product too was
measured no better and stretches two near-equal chunks to 0 and 1, so a feedback boost
could no longer reorder close calls. The fused value replaces `score`.

Pure: no Kafka and no asyncio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from shared.contract.records import SearchHit

Method = Literal["rrf", "normalised"]


@dataclass(frozen=True)
class Fusion:
    method: Method = "rrf"
    rrf_k: int = 60
    dense_weight: float = 1.0
    lexical_weight: float = 1.0


def fuse(hits: Sequence[SearchHit], top_k: int, fusion: Fusion) -> tuple[SearchHit, ...]:
    """The top k of `hits` (distinct chunks) by fused score, ties by chunk id."""
    if not hits:
        return ()
    fused = _rrf(hits, fusion) if fusion.method == "rrf" else _normalised(hits, fusion)
    ranked = sorted(zip(fused, hits, strict=True), key=lambda p: (-p[0], p[1].chunk_id))
    return tuple(h.model_copy(update={"score": s}) for s, h in ranked[:top_k])


def _rrf(hits: Sequence[SearchHit], f: Fusion) -> list[float]:
    out = [0.0] * len(hits)
    dense = sorted(range(len(hits)), key=lambda i: (-hits[i].score, hits[i].chunk_id))
    for rank, i in enumerate(dense, 1):
        out[i] += f.dense_weight / (f.rrf_k + rank)
    lexical = sorted((i for i in range(len(hits)) if hits[i].lexical > 0),
                     key=lambda i: (-hits[i].lexical, hits[i].chunk_id))
    for rank, i in enumerate(lexical, 1):
        out[i] += f.lexical_weight / (f.rrf_k + rank)
    return out


def _normalised(hits: Sequence[SearchHit], f: Fusion) -> list[float]:
    top = max(h.lexical for h in hits)
    scale = f.lexical_weight / top if top > 0 else 0.0
    return [f.dense_weight * h.score + scale * h.lexical for h in hits]
