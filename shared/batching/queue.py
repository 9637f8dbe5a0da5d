"""The request queue in front of a model: priorities, two limits, and the rule that cuts a batch.

Pure and clock-free (every call takes `now`). The policy is Text Embeddings Inference's:
nothing waits to fill a batch. Whenever the backend is free its owner cuts the next batch
from whatever is queued, so batches are one request on a quiet service and grow only as
requests pile up behind a busy backend. A batch is bounded by two limits, its padded
tokens (sequences x the longest, shared.batching.padding) and its request count; a single
request over the token limit still goes, alone, or it would starve. Requests leave by
priority (INTERACTIVE before BULK), first come first served within one; a request that
does not fit ends the batch rather than being skipped, so none is overtaken in its class.
Requests whose callers left (cancelled, or past their deadline) are dropped at the cut and
never reach the backend.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from shared.batching.padding import padded_tokens
from shared.errors import InfrastructureError

T = TypeVar("T")
INTERACTIVE, BULK = 0, 1


class QueueFullError(InfrastructureError):
    """The queue is at capacity: the caller should retry later (gRPC RESOURCE_EXHAUSTED)."""


@dataclass(frozen=True)
class BatchLimits:
    max_tokens: int  # padded tokens of one batch
    max_requests: int

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or self.max_requests < 1:
            raise ValueError(f"batch limits must be positive: {self}")


@dataclass(eq=False)
class Request(Generic[T]):
    payload: T
    sequences: int  # rows it adds to a forward pass
    longest: int  # tokens of its longest row
    priority: int
    enqueued: float
    deadline: float | None  # `now` after which its caller no longer waits
    seq: int  # arrival order


@dataclass(frozen=True)
class Cut(Generic[T]):
    batch: list[Request[T]]
    dropped: list[Request[T]]  # callers gone: never run

    @property
    def padded_tokens(self) -> int:
        return padded_tokens(sum(r.sequences for r in self.batch),
                             max((r.longest for r in self.batch), default=0))


@dataclass
class RequestQueue(Generic[T]):
    limits: BatchLimits
    capacity: int
    _classes: dict[int, deque[Request[T]]] = field(default_factory=dict)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _size: int = 0

    def __len__(self) -> int:
        return self._size

    @property
    def full(self) -> bool:
        return self._size >= self.capacity

    def push(self, payload: T, sequences: int, longest: int, priority: int = INTERACTIVE,
             now: float = 0.0, deadline: float | None = None) -> Request[T]:
        if self.full:
            msg = f"queue full: {self.capacity} requests already waiting; retry later"
            raise QueueFullError(msg)
        request = Request(payload, max(1, sequences), max(1, longest), priority, now,
                          deadline, next(self._seq))
        self._classes.setdefault(priority, deque()).append(request)
        self._size += 1
        return request

    def pending(self) -> list[Request[T]]:
        """Every queued request, in the order a cut would consider them."""
        return [r for priority in sorted(self._classes) for r in self._classes[priority]]

    def discard(self, request: Request[T]) -> bool:
        """Take a queued request out (its caller left); False if it already left."""
        try:
            self._classes[request.priority].remove(request)
        except (KeyError, ValueError):
            return False
        self._size -= 1
        return True

    def purge(self, now: float, gone: Callable[[Request[T]], bool]) -> list[Request[T]]:
        """Drop every request whose caller left, wherever it stands in the queue."""
        dropped = [r for q in self._classes.values() for r in q if _left(r, now, gone)]
        for request in dropped:
            self.discard(request)
        return dropped

    def cut(self, now: float, gone: Callable[[Request[T]], bool] = lambda r: False,
            max_requests: int | None = None) -> Cut[T]:
        """The next batch (empty when nothing is queued) within the limits, and
        `max_requests` if lower; requests met on the way whose caller left are dropped."""
        most = self.limits.max_requests
        if max_requests is not None:
            most = min(most, max_requests)
        batch: list[Request[T]] = []
        dropped: list[Request[T]] = []
        rows = longest = 0
        for priority in sorted(self._classes):
            queue = self._classes[priority]
            while queue:
                head = queue[0]
                if _left(head, now, gone):
                    dropped.append(queue.popleft())
                    continue
                wider = max(longest, head.longest)
                if len(batch) >= most or (
                        batch and padded_tokens(rows + head.sequences, wider)
                        > self.limits.max_tokens):
                    self._size -= len(batch) + len(dropped)
                    return Cut(batch, dropped)
                batch.append(queue.popleft())
                rows, longest = rows + head.sequences, wider
        self._size -= len(batch) + len(dropped)
        return Cut(batch, dropped)


def _left(request: Request[T], now: float, gone: Callable[[Request[T]], bool]) -> bool:
    return gone(request) or (request.deadline is not None and request.deadline <= now)
