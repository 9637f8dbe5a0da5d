"""Dynamic micro-batching: close on a padded-token budget or a wait that adapts to load.

A batch closes as soon as its padded tokens reach the budget (the model is then as busy
as it usefully gets) or when its oldest item has waited `wait_s`. After each batch the
wait adapts: a batch that closed on time while underfilled lengthens it (more items per
forward pass), a batch whose oldest item missed the latency target shortens it. The
clock is injected so the controller is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class BatchPolicy:
    token_budget: int  # padded tokens (sequences x longest) that close a batch at once
    max_items: int  # documents per batch, whatever their size
    min_wait_s: float
    max_wait_s: float
    latency_target_s: float  # oldest arrival -> batch encoded
    underfill: float = 0.5  # a timed-out batch below this fill lengthens the wait
    grow: float = 1.5
    shrink: float = 0.5

    @property
    def initial_wait_s(self) -> float:
        return self.min_wait_s


@dataclass(frozen=True)
class Item(Generic[T]):
    value: T
    sequences: int  # chunks to encode
    longest: int  # tokens of the longest chunk, special tokens included
    arrived: float


@dataclass(frozen=True)
class Batch(Generic[T]):
    items: list[Item[T]]
    padded_tokens: int
    full: bool  # closed by the budget, not by the wait

    @property
    def values(self) -> list[T]:
        return [i.value for i in self.items]


def padded_tokens(items: list[Item[T]]) -> int:
    """What one padded forward pass over every chunk of `items` costs, in tokens."""
    return sum(i.sequences for i in items) * max((i.longest for i in items), default=0)


@dataclass
class DynamicBatcher(Generic[T]):
    policy: BatchPolicy
    clock: Callable[[], float] = time.monotonic
    pending: list[Item[T]] = field(default_factory=list)
    wait_s: float = -1.0

    def __post_init__(self) -> None:
        if self.wait_s < 0:
            self.wait_s = self.policy.initial_wait_s

    def add(self, value: T, sequences: int, longest: int) -> None:
        self.pending.append(Item(value, sequences, longest, self.clock()))

    def full(self) -> bool:
        return (len(self.pending) >= self.policy.max_items
                or padded_tokens(self.pending) >= self.policy.token_budget)

    def due_in(self) -> float | None:
        """Seconds until the pending batch must close (0: now); None when nothing is pending."""
        if not self.pending:
            return None
        if self.full():
            return 0.0
        return max(0.0, self.pending[0].arrived + self.wait_s - self.clock())

    def take(self) -> Batch[T]:
        """The oldest items that fit the budget (at least one); the rest stay pending."""
        n = 1
        while (n < len(self.pending) and n < self.policy.max_items
               and padded_tokens(self.pending[:n + 1]) <= self.policy.token_budget):
            n += 1
        items, self.pending = self.pending[:n], self.pending[n:]
        size = padded_tokens(items)
        full = size >= self.policy.token_budget or n >= self.policy.max_items or bool(self.pending)
        return Batch(items, size, full)

    def done(self, batch: Batch[T]) -> float:
        """Adapt the wait to how `batch` went (call after encoding it); returns the new wait."""
        latency = self.clock() - min(i.arrived for i in batch.items)
        p = self.policy
        if latency > p.latency_target_s:
            self.wait_s = max(p.min_wait_s, self.wait_s * p.shrink)
        elif not batch.full and batch.padded_tokens < p.underfill * p.token_budget:
            self.wait_s = min(p.max_wait_s, self.wait_s * p.grow)
        return self.wait_s
