"""Cached answers bounded by count (least recently used out first) and by age: an entry
older than the TTL is never served, and is dropped at the next call whether or not it is
asked for again (each holds its hits' texts, which must not outlive the text retention).

Pure and synchronous; a lock makes each call atomic for threads as well (on the event loop
every call is atomic anyway: nothing in here awaits).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from services.inference.answer.modes import ModeChoice
from services.inference.answer.result import Answer
from services.inference.cache.key import CacheKey
from services.inference.engine import Retrieval


@dataclass(frozen=True)
class Entry:
    retrieval: Retrieval  # what the answer was made from, with the index generation
    choice: ModeChoice | None = None  # None for a Retrieve
    answer: Answer | None = None
    stored_at: float = 0.0  # the store's clock


class AnswerStore:
    def __init__(self, max_entries: int, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries, self.ttl_s, self._clock = max_entries, ttl_s, clock
        self._entries: OrderedDict[CacheKey, Entry] = OrderedDict()
        self._stored: deque[tuple[float, CacheKey]] = deque()  # in storing order
        self._lock = threading.Lock()

    def _sweep(self) -> None:
        """Drop every entry older than the TTL (amortised O(1) per entry; under the lock)."""
        cut = self._clock() - self.ttl_s
        while self._stored and self._stored[0][0] < cut:
            at, key = self._stored.popleft()
            entry = self._entries.get(key)
            if entry is not None and entry.stored_at == at:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: CacheKey) -> tuple[Entry | None, bool]:
        """The entry under `key` and whether one was there but too old (dropped now)."""
        with self._lock:
            try:
                entry = self._entries.get(key)
                if entry is None:
                    return None, False
                if self._clock() - entry.stored_at > self.ttl_s:
                    del self._entries[key]
                    return None, True
                self._entries.move_to_end(key)
                return entry, False
            finally:
                self._sweep()  # on a hit too: the others' age runs whoever is asked for

    def put(self, key: CacheKey, entry: Entry, *, keep_age: bool = False) -> None:
        """Store `entry` (its age restarts unless `keep_age`: a revalidated answer still
        leaves by its first store's time), dropping the least recently used beyond the
        bound."""
        with self._lock:
            self._sweep()
            if keep_age and self._clock() - entry.stored_at > self.ttl_s:
                return  # it would leave at once: its first store's time is past the TTL
            if not keep_age:
                entry = Entry(entry.retrieval, entry.choice, entry.answer, self._clock())
                self._stored.append((entry.stored_at, key))
            # (kept age: the first store's place in _stored still stands for it)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def drop(self, key: CacheKey) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._stored.clear()
