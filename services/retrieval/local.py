"""This worker's shards answering search requests in-process (one-process mode's fast path).

The answer is the broker path's own handler (`agents.answer`), called per partition, so
filters, freshness and hit types are the same; only the broker round trip is skipped. It
answers only while this worker owns and has caught up every partition asked and no
rebalance is under way; otherwise it returns None and the caller uses the broker, whose
shards give the precise per-shard state ("recovering", silence) as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from services.retrieval.shards import Shards
from shared.records import SearchReply, SearchRequest

Answer = Callable[[SearchRequest, int], SearchReply]  # (request, partition) -> its reply


class LocalShards:
    def __init__(self, shards: Shards, answer: Answer, rebalancing: Callable[[], bool]) -> None:
        self._shards, self._answer, self._rebalancing = shards, answer, rebalancing
        self.answered = 0  # requests answered here (tests, bench)

    def covers(self, partitions: Sequence[int]) -> bool:
        """True when every partition's shard is here and caught up, outside a rebalance."""
        return (not self._rebalancing() and bool(partitions)
                and all(self._shards.ready(p) for p in partitions))

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
