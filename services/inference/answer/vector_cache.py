"""A bounded least-recently-used map from text to its vector, optionally bounded by age.

The extractive answer embeds the sentences of the chunks it cites; popular chunks are
cited again and again, and their sentences need encoding only once. Pure and synchronous.
The keys are document sentences: with a text retention (`ttl_s`) no entry outlives it,
whether or not it is asked for again (each call drops the expired ones first).
Callers key it by `scoped(scope, text)`: a vector one caller's call left must not make
another's faster (access-control.md, side channels).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

import numpy as np

SEPARATOR = "\x00"  # never in a scope (its hash, or "*")


def scoped(scope: str, text: str) -> str:
    """The key of `text` in the cache of the callers reading `scope` (cache.key.scope_of)."""
    return f"{scope}{SEPARATOR}{text}"


class VectorCache:
    def __init__(self, capacity: int, ttl_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity, self.ttl_s, self._clock = capacity, ttl_s, clock
        self._rows: OrderedDict[str, np.ndarray] = OrderedDict()
        self._born: dict[str, float] = {}  # when each row was stored
        self._stored: deque[tuple[float, str]] = deque()  # in storing order, for the sweep
        self.hits = self.misses = 0

    def _sweep(self) -> None:
        """Drop every row stored longer than `ttl_s` ago (amortised O(1) per row)."""
        if self.ttl_s is None:
            return
        cut = self._clock() - self.ttl_s
        while self._stored and self._stored[0][0] <= cut:
            at, text = self._stored.popleft()
            if self._born.get(text) == at:  # not stored again since
                del self._born[text]
                self._rows.pop(text, None)

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(self, texts: Sequence[str]) -> tuple[list[np.ndarray | None], list[str]]:
        """Each text's vector or None, and the distinct texts that were missing."""
        self._sweep()
        found: list[np.ndarray | None] = []
        missing: dict[str, None] = {}
        for text in texts:
            row = self._rows.get(text)
            if row is None:
                missing[text] = None
            else:
                self._rows.move_to_end(text)
            found.append(row)
        self.hits += len(texts) - sum(1 for f in found if f is None)
        self.misses += len(missing)
        return found, list(missing)

    def store(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        if self.capacity <= 0:
            return
        self._sweep()
        now = self._clock()
        for text, row in zip(texts, vectors, strict=True):
            self._rows[text] = row
            self._rows.move_to_end(text)
            if self.ttl_s is not None:
                self._born[text] = now
                self._stored.append((now, text))
        while len(self._rows) > self.capacity:
            text, _ = self._rows.popitem(last=False)
            self._born.pop(text, None)

    def fill(self, texts: Sequence[str], found: list[np.ndarray | None],
             missing: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """`texts`' vectors in order: `found` completed with the freshly encoded `missing`."""
        fresh = dict(zip(missing, vectors, strict=True))
        rows = [row if row is not None else fresh[text] for text, row in zip(texts, found,
                                                                              strict=True)]
        return np.stack(rows) if rows else vectors[:0]
