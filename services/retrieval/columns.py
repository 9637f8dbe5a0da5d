"""Chunk metadata as numpy columns aligned with FAISS ids, so filters are vectorised masks.

Access labels are a column too: one packed bitmap over slots per label (bit set: the chunk
carries the label), so a caller's grants become a mask by OR-ing a handful of bitmaps, the
same mask that time, domain and source narrow. 1,000 groups over 100k slots cost 12.5 MB;
a caller in 5 groups ORs 7 bitmaps of 12.5 KB (its groups, PUBLIC, its user label).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from shared.contract.access import Access
from shared.contract.records import SearchHit

EVERYTHING = Access.everything()


@dataclass(frozen=True)
class Filters:
    since: float | None = None
    until: float | None = None
    domain: str | None = None
    source: str | None = None
    # Who asks, always said: no default, so a caller that forgets to pass it cannot read
    # everything by accident (search.py builds it from the request, whose own default is
    # public-only; benchmarks and tests that mean all access say EVERYTHING).
    access: Access = field(kw_only=True)

    def admits(self, hit: SearchHit) -> bool:
        return ((self.since is None or hit.event_time >= self.since)
                and (self.until is None or hit.event_time <= self.until)
                and (self.domain is None or hit.domain == self.domain)
                and (self.source is None or hit.source == self.source)
                and self.access.admits(hit.acl))

    @property
    def empty(self) -> bool:
        """No narrowing at all: every chunk passes, so the search needs no mask."""
        return self == Filters(access=EVERYTHING)


class Columns:
    """One row ("slot") per live chunk; the slot number is the chunk's FAISS id.

    Freed slots are reused, so ids stay dense and a filter is a bitmap over slots
    (faiss.IDSelectorBitmap) instead of a hash set of 63-bit ids built in Python.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.event_time = np.zeros(capacity, dtype="float64")
        self.domain = np.full(capacity, -1, dtype="int32")
        self.source = np.full(capacity, -1, dtype="int32")
        self.live = np.zeros(capacity, dtype=bool)
        self.hits: list[SearchHit | None] = []
        self.free: list[int] = []
        self.codes: dict[str, dict[str, int]] = {"domain": {}, "source": {}}
        # label -> packed little-endian bitmap over slots (grown only as far as its highest
        # slot) and how many slots carry it, so a label no chunk carries any more is dropped.
        self.labels: dict[str, np.ndarray] = {}
        self.label_count: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.hits) - len(self.free)

    @property
    def size(self) -> int:
        """Slots in use or freed: the length of every mask."""
        return len(self.hits)

    @classmethod
    def restore(cls, hits: list[SearchHit | None]) -> Columns:
        """Columns with exactly these slots (None: a free slot), as a snapshot saved them."""
        columns = cls(max(1024, len(hits)))
        for hit in hits:
            slot = columns._append()
            if hit is None:
                columns.free.append(slot)
            else:
                columns._set(slot, hit)
        return columns

    def add(self, hit: SearchHit) -> int:
        slot = self.free.pop() if self.free else self._append()
        self._set(slot, hit)
        return slot

    def _set(self, slot: int, hit: SearchHit) -> None:
        self.hits[slot] = hit
        self.event_time[slot] = hit.event_time
        self.domain[slot] = self._code("domain", hit.domain)
        self.source[slot] = self._code("source", hit.source)
        self.live[slot] = True
        byte, bit = slot >> 3, np.uint8(1 << (slot & 7))
        for label in hit.acl:
            bitmap = self.labels.get(label)
            if bitmap is None or byte >= len(bitmap):
                grown = np.zeros(max(128, 2 * (byte + 1)), dtype="uint8")
                if bitmap is not None:
                    grown[:len(bitmap)] = bitmap
                bitmap = self.labels[label] = grown
            bitmap[byte] |= bit
            self.label_count[label] = self.label_count.get(label, 0) + 1

    def remove(self, slot: int) -> None:
        hit = self.hits[slot]
        byte, keep = slot >> 3, np.uint8(0xFF ^ (1 << (slot & 7)))
        for label in hit.acl if hit is not None else ():
            self.labels[label][byte] &= keep
            self.label_count[label] -= 1
            if not self.label_count[label]:
                del self.labels[label], self.label_count[label]
        self.hits[slot] = None
        self.live[slot] = False
        self.free.append(slot)

    def _append(self) -> int:
        slot = len(self.hits)
        if slot == len(self.live):
            grow = max(1024, slot)  # doubling keeps appends amortised O(1)
            self.event_time = np.concatenate([self.event_time, np.zeros(grow)])
            self.domain = np.concatenate([self.domain, np.full(grow, -1, dtype="int32")])
            self.source = np.concatenate([self.source, np.full(grow, -1, dtype="int32")])
            self.live = np.concatenate([self.live, np.zeros(grow, dtype=bool)])
        self.hits.append(None)
        return slot

    def _code(self, column: str, value: str) -> int:
        return self.codes[column].setdefault(value, len(self.codes[column]))

    def access_mask(self, access: Access) -> np.ndarray:
        """Live slots the caller may read: all with `all_access`, else those carrying one
        of its grants (a grant no chunk carries adds nothing; a chunk without labels is
        never among them)."""
        n = self.size
        if access.all_access:
            return self.live[:n].copy()
        packed = np.zeros((n + 7) >> 3, dtype="uint8")
        for grant in access.grants:
            bitmap = self.labels.get(grant)
            if bitmap is not None:
                m = min(len(bitmap), len(packed))
                packed[:m] |= bitmap[:m]
        return np.unpackbits(packed, count=n, bitorder="little").view(bool) & self.live[:n]

    def permitted(self, access: Access) -> int:
        """How many live chunks the caller may read."""
        return len(self) if access.all_access else int(self.access_mask(access).sum())

    def mask(self, filters: Filters) -> np.ndarray:
        """Admitted live slots (readable by the caller, inside the filters) as a boolean
        array of length `size`."""
        n = self.size
        mask = self.access_mask(filters.access)
        if filters.since is not None:
            mask &= self.event_time[:n] >= filters.since
        if filters.until is not None:
            mask &= self.event_time[:n] <= filters.until
        for column, value in (("domain", filters.domain), ("source", filters.source)):
            if value is not None:
                code = self.codes[column].get(value)
                if code is None:  # a value never indexed here admits nothing
                    return np.zeros(n, dtype=bool)
                mask &= getattr(self, column)[:n] == code
        return mask

    def scan_mask(self, filters: Filters) -> np.ndarray:
        """The same mask by a per-row Python scan: the old way, kept as the benchmark baseline."""
        return np.array([h is not None and filters.admits(h) for h in self.hits], dtype=bool)
