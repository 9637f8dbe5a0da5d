"""Pure reranking arithmetic: the candidates a cross-encoder re-scores, and the order after it.

The first `candidates` hits (in the first stage's order) are re-scored; they come first,
best cross-encoder score first, and a tie keeps the first stage's order (a stable sort),
so equal scores never shuffle results between calls; a NaN score (a model overflowing in
half precision) ranks last rather than breaking the sort. Hits beyond the candidates keep
their first-stage order after them, with no rerank score. The result is cut to `top_k`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

H = TypeVar("H")


@dataclass(frozen=True)
class Reranked(Generic[H]):
    hits: tuple[H, ...]
    scores: tuple[float | None, ...]  # per hit: its cross-encoder score; None: not re-scored


def split(hits: Sequence[H], candidates: int) -> tuple[tuple[H, ...], tuple[H, ...]]:
    """(the hits to re-score, the rest), in the first stage's order."""
    if candidates < 1:
        raise ValueError(f"candidates must be at least 1, got {candidates}")
    return tuple(hits[:candidates]), tuple(hits[candidates:])


def reorder(head: Sequence[H], scores: Sequence[float], rest: Sequence[H],
            top_k: int) -> Reranked[H]:
    """`head` by `scores` (best first, ties in their given order), then `rest`; cut to
    `top_k`."""
    if len(scores) != len(head):
        raise ValueError(f"{len(scores)} scores for {len(head)} candidates")
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    ranked = sorted(range(len(head)), key=lambda i: _key(scores[i]))  # sorted() is stable
    hits = tuple(head[i] for i in ranked) + tuple(rest)
    shown: tuple[float | None, ...] = tuple(float(scores[i]) for i in ranked)
    shown += (None,) * len(rest)
    return Reranked(hits[:top_k], shown[:top_k])


def _key(score: float) -> float:
    return math.inf if math.isnan(score) else -score
