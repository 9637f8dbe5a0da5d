"""Clicks and skips on cited chunks: validation, and the ranking boost they earn.

Pure: the counts come from a FeedbackView (the hopping one-hour tables in production,
a dict in tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shared.contract.records import SearchHit
from shared.errors import InvalidInput

KINDS = ("click", "skip")
MAX_CHUNK_ID_CHARS = 512


class FeedbackView(Protocol):
    def counts(self, chunk_id: str) -> tuple[int, int]:
        """(clicks, skips) of the chunk in the current window."""
        ...


def check_feedback(chunk_id: str, kind: str) -> tuple[str, str]:
    """The chunk id and kind, or InvalidInput naming the bad field."""
    if not chunk_id.strip():
        raise InvalidInput("empty_chunk_id", "chunk_id", "the chunk id is empty")
    if len(chunk_id) > MAX_CHUNK_ID_CHARS:
        msg = f"longer than {MAX_CHUNK_ID_CHARS} characters"
        raise InvalidInput("chunk_id_too_long", "chunk_id", msg)
    if kind not in KINDS:
        raise InvalidInput("unknown_kind", "kind", "kind must be CLICK or SKIP")
    return chunk_id.strip(), kind


def boost(clicks: int, skips: int, weight: float, cap: float) -> float:
    """weight per net click, clamped to +-cap so feedback reorders close calls only."""
    return max(-cap, min(cap, weight * (clicks - skips)))


def boost_by_feedback(hits: Sequence[SearchHit], view: FeedbackView, weight: float,
                      cap: float) -> tuple[SearchHit, ...]:
    """Hits ordered by score plus boost; the scores shown stay the retrieval scores."""
    if weight <= 0:
        return tuple(hits)
    adjusted = [(h.score + boost(*view.counts(h.chunk_id), weight, cap), h) for h in hits]
    adjusted.sort(key=lambda pair: (-pair[0], pair[1].chunk_id))
    return tuple(h for _, h in adjusted)
