"""A bounded least-recently-used map from text to its vector.

The extractive answer embeds the sentences of the chunks it cites; popular chunks are
cited again and again, and their sentences need encoding only once. Pure and synchronous.
Callers key it by `scoped(scope, text)`: a vector one caller's call left must not make
another's faster (access-control.md, side channels).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

SEPARATOR = "\x00"  # never in a scope (its hash, or "*")


def scoped(scope: str, text: str) -> str:
    """The key of `text` in the cache of the callers reading `scope` (cache.key.scope_of)."""
    return f"{scope}{SEPARATOR}{text}"


class VectorCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._rows)

    def lookup(self, texts: Sequence[str]) -> tuple[list[np.ndarray | None], list[str]]:
        """Each text's vector or None, and the distinct texts that were missing."""
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
        for text, row in zip(texts, vectors, strict=True):
            self._rows[text] = row
            self._rows.move_to_end(text)
        while len(self._rows) > self.capacity:
            self._rows.popitem(last=False)

    def fill(self, texts: Sequence[str], found: list[np.ndarray | None],
             missing: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """`texts`' vectors in order: `found` completed with the freshly encoded `missing`."""
        fresh = dict(zip(missing, vectors, strict=True))
        rows = [row if row is not None else fresh[text] for text, row in zip(texts, found,
                                                                              strict=True)]
        return np.stack(rows) if rows else vectors[:0]
