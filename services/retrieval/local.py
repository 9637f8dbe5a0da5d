"""This worker's shards answering search requests in-process (one-process mode's fast path).

The answer is the broker path's own handler (`search.answer`), called per partition, so
filters, freshness and hit types are the same; only the broker round trip is skipped. It
answers only while this worker's consumer is assigned every partition asked, its shard
for each has caught up, and no rebalance is under way (a shard revoked but not yet released
must not answer); otherwise it returns None and the caller uses the broker, whose
shards give the precise per-shard state ("recovering", silence) as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence

from services.retrieval.shards import Shards
from shared.contract.records import SearchReply, SearchRequest

Answer = Callable[[SearchRequest, int], SearchReply]  # (request, partition) -> its reply


class LocalShards:
    def __init__(self, shards: Shards, answer: Answer, rebalancing: Callable[[], bool],
                 assigned: Callable[[], Collection[int]]) -> None:
        self._shards, self._answer = shards, answer
        self._rebalancing, self._assigned = rebalancing, assigned
        self.answered = 0  # requests answered here (tests, bench)

    def covers(self, partitions: Sequence[int]) -> bool:
        """True when every partition is assigned here and its shard caught up, outside a
        rebalance."""
        if self._rebalancing() or not partitions:
            return False
        assigned = self._assigned()
        return all(p in assigned and self._shards.ready(p) for p in partitions)

    def generation(self, partitions: Sequence[int]) -> tuple[int, int] | None:
        """What these shards hold, as a value that changes whenever any search answer could
        (Shards.generation, tagged with this object); None when they cannot answer now."""
        if not self.covers(partitions):
            return None
        return id(self), self._shards.generation

    async def answer(self, requests: Sequence[SearchRequest]) -> list[SearchReply] | None:
        replies = []
        for request in requests:
            # Checked before every shard: a rebalance may begin while we yield between them.
            if not self.covers([r.partition for r in requests]):
                return None
            # One shard's search per event-loop turn, as the broker path's handler does.
            replies.append(self._answer(request, request.partition))
            await asyncio.sleep(0)
        self.answered += len(replies)
        return replies
