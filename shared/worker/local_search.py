"""A process-wide slot where retrieval shards living in this process offer direct search.

One-process mode (services/onebox) runs retrieval and inference on one worker: inference's
search client can then ask the shards directly instead of through the broker. Services do
not import each other, so they meet here: retrieval registers a `LocalSearch`, inference
looks it up. Nothing is registered in a process without retrieval shards.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol

from shared.contract.records import SearchReply, SearchRequest


class LocalSearch(Protocol):
    async def answer(self, requests: Sequence[SearchRequest]) -> list[SearchReply] | None:
        """Each request's reply from its shard, or None when this process cannot answer
        every request's partition now (not owned, still recovering, rebalancing)."""
        ...

    def generation(self, partitions: Sequence[int]) -> Hashable | None:
        """A value equal between two moments only if no search of these partitions could
        answer differently (nothing applied, assigned or released in between); None when
        this process cannot answer them all now."""
        ...


_registered: LocalSearch | None = None


def register(local: LocalSearch | None) -> None:
    """Offer (None: withdraw) this process's shards to in-process search clients."""
    global _registered
    _registered = local


def lookup() -> LocalSearch | None:
    return _registered
