"""The dynamic batcher's rules: a bounded priority queue cut into batches, and the adaptive wait.

Pure and clock-free (every call takes `now`), so a fake clock drives it in tests. A batch
is cut when it is full (items or tokens) or when its oldest item has waited `wait_s`.
Interactive items leave before bulk ones; within a priority, first come first served.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from shared.errors import InfrastructureError

T = TypeVar("T")
INTERACTIVE, BULK = 0, 1
MIN_GROWTH_S = 0.0005  # an adaptive wait of 0 must still be able to grow


class QueueFullError(InfrastructureError):
    """The batcher's queue is at capacity: the API answers RESOURCE_EXHAUSTED."""


@dataclass(eq=False)
class Item(Generic[T]):
    payload: T
    cost: int  # tokens
    priority: int
    enqueued: float
    seq: int


@dataclass
class WaitPolicy:
    """How long a batch may wait to fill, adjusted after every batch when adaptive.

    A batch over the latency target halves the wait, and so does a batch of one: nobody
    came while it waited, so a lone caller (one client, a quiet hour) stops paying a wait
    that buys nothing. A batch that found company but is under half full lengthens it
    (x1.5, up to the ceiling): others are arriving, a little more patience fills it.
    """

    wait_s: float
    ceiling_s: float
    target_s: float
    adaptive: bool = True
    floor_s: float = 0.0

    def observe(self, size: int, max_batch: int, latency_s: float) -> None:
        if not self.adaptive:
            return
        if latency_s > self.target_s or size <= 1 < max_batch:
            self.wait_s = max(self.floor_s, self.wait_s / 2)
        elif size / max_batch < 0.5:
            self.wait_s = min(self.ceiling_s, max(self.wait_s * 1.5, MIN_GROWTH_S))


@dataclass
class BatchQueue(Generic[T]):
    max_batch: int
    token_budget: int
    capacity: int
    policy: WaitPolicy
    _items: list[Item[T]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def __len__(self) -> int:
        return len(self._items)

    def push(self, payload: T, cost: int, priority: int, now: float) -> Item[T]:
        if len(self._items) >= self.capacity:
            msg = f"queue full: {self.capacity} requests already waiting; retry later"
            raise QueueFullError(msg)
        item = Item(payload, max(1, cost), priority, now, next(self._seq))
        self._items.append(item)
        return item

    def discard(self, item: Item[T]) -> bool:
        """Drop a queued item (its caller went away); False if it already left."""
        try:
            self._items.remove(item)
        except ValueError:
            return False
        return True

    def _full(self) -> bool:
        return (len(self._items) >= self.max_batch
                or sum(i.cost for i in self._items) >= self.token_budget)

    def due(self) -> float | None:
        """When the next batch should be cut (-inf: now); None while empty."""
        if not self._items:
            return None
        if self._full():
            return float("-inf")
        return min(i.enqueued for i in self._items) + self.policy.wait_s

    def take(self, limit: int | None = None) -> list[Item[T]]:
        """The next batch: by priority then arrival, within max_batch (or `limit`, if
        lower) and the token budget.

        The first item always goes, even over budget, or an oversized one would starve.
        Order is kept: an item that does not fit stops the batch rather than being skipped.
        """
        ordered = sorted(self._items, key=lambda i: (i.priority, i.seq))
        most = self.max_batch if limit is None else min(limit, self.max_batch)
        batch: list[Item[T]] = []
        tokens = 0
        for item in ordered:
            if len(batch) == most:
                break
            if batch and tokens + item.cost > self.token_budget:
                break
            batch.append(item)
            tokens += item.cost
        taken = set(map(id, batch))
        self._items = [i for i in self._items if id(i) not in taken]
        return batch
