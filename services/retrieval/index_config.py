"""How a shard's vector index is built and searched: plain values, no FAISS import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Strategy = Literal["selector", "overfetch"]


@dataclass(frozen=True)
class IndexConfig:
    ivf_threshold: int = 20_000  # vectors before an IVF replaces the exact index
    nlist_factor: float = 1.0  # nlist = factor * sqrt(n)
    nprobe: int = 16
    retrain_growth: float = 4.0  # retrain once the shard is this many times its trained size
    overfetch: float = 2.0  # first over-fetch: k * this / share of chunks admitted
    # At most this many admitted vectors (a rare filter, a caller who may read little):
    # search every IVF list through the bitmap selector, an exact search of those vectors.
    exact_below: int = 4096
    use_gpu: bool = True  # train IVF centroids on a GPU when one is present
