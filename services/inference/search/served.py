"""Which chunks each restricted caller was recently shown: the permitted-check of feedback.

A click or skip is taken from a caller that may not read everything only on a chunk this
instance served to the caller's scope (Access.scope()) within the feedback window; any other
chunk id, one that does not exist or one the caller may not read, is refused alike
(NOT_FOUND), so feedback never tells a caller whether a chunk it cannot read exists. What a
scope was served it could read when served (the shards filtered for it); a label revoked
since then leaves at most `ttl_s` of feedback, not of reading. Bounded: the least recently
served pairs leave first. Per instance: feedback must reach the instance that answered
(docs/design/access-control.md).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

FEEDBACK_WINDOW_S = 3600.0  # the feedback tables' window: a click counts for an hour


class ServedChunks:
    def __init__(self, capacity: int, ttl_s: float = FEEDBACK_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity, self.ttl_s, self.clock = capacity, ttl_s, clock
        self._at: OrderedDict[tuple[str, str], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._at)

    def record(self, scope: str, chunk_ids: Iterable[str]) -> None:
        now = self.clock()
        for chunk_id in chunk_ids:
            key = (scope, chunk_id)
            self._at[key] = now
            self._at.move_to_end(key)
        while len(self._at) > self.capacity:
            self._at.popitem(last=False)

    def shown(self, scope: str, chunk_id: str) -> bool:
        at = self._at.get((scope, chunk_id))
        return at is not None and self.clock() - at <= self.ttl_s
