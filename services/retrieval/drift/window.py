"""One tumbling window's summary and the rolling reference of the windows before it (pure).

A window keeps its document count, the sum of its unit vectors, a bounded term count, the
documents farthest from the reference centroid and a uniform reservoir of its documents:
O(dim x (candidates + reservoir) + terms) whatever its size. At the close the candidates of
both are ranked by how far each moves along the window's shift (window mean - reference
mean): the documents most responsible for it.
The reference pools the last K judged windows. For unit vectors the pooled spread
E||x - mean||^2 is 1 - ||mean||^2, so the centroid statistic needs no stored vectors.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

MAX_WINDOW_TERMS = 2_000  # a window's term counts are cut back to this many (most frequent)
KEPT_TERMS = 200  # terms a closed window hands to the reference
RESERVOIR = 32  # documents a window keeps uniformly at random, with their vectors


@dataclass(frozen=True, order=True)
class Far:
    """A document of the window and its cosine distance to the reference centroid."""

    distance: float
    doc_id: str
    version: int
    title: str = ""
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass
class Window:
    start: float
    end: float
    count: int = 0
    total: np.ndarray | None = None  # float64 sum of the documents' unit vectors
    terms: Counter[str] = field(default_factory=Counter)
    far: list[Far] = field(default_factory=list)  # min-heap of the farthest documents
    seen: set[tuple[str, int]] = field(default_factory=set)  # (doc id, version): no repeats
    late: int = 0  # of `count`: samples of earlier windows that arrived after those closed
    dropped: int = 0  # samples of the past counted in no window, since the previous report
    reservoir: list[Far] = field(default_factory=list)

    def add(self, vector: np.ndarray, terms: Mapping[str, int], far: Far | None,
            top_docs: int) -> None:
        self.count += 1
        v = vector.astype(np.float64)
        self.total = v if self.total is None else self.total + v
        self.terms.update(terms)
        if len(self.terms) > 2 * MAX_WINDOW_TERMS:
            self.terms = Counter(dict(self.terms.most_common(MAX_WINDOW_TERMS)))
        if far is None:
            return
        (heapq.heappush if len(self.far) < 4 * top_docs else heapq.heappushpop)(self.far, far)
        if len(self.reservoir) < RESERVOIR:  # Vitter's algorithm R, seeded by the window
            self.reservoir.append(far)
        elif (slot := random.Random(f"{self.start}/{self.count}").randrange(self.count)) \
                < RESERVOIR:
            self.reservoir[slot] = far

    def mean(self) -> np.ndarray:
        assert self.total is not None and self.count
        return self.total / self.count

    def responsible(self, centroid: np.ndarray, top: int) -> list[Far]:
        """The kept documents that move farthest along the window's shift from `centroid`."""
        shift = self.mean() - centroid
        norm = float(np.linalg.norm(shift))
        if not norm > 0:
            return []
        unique = {(f.doc_id, f.version): f for f in [*self.far, *self.reservoir]}
        ranked = sorted(unique.values(), reverse=True,
                        key=lambda f: float((f.vector - centroid) @ shift) / norm
                        if f.vector is not None else -math.inf)
        return ranked[:top]

    def total_or_zero(self) -> np.ndarray:
        return self.total if self.total is not None else np.zeros(0)


@dataclass
class Past:
    """What a judged window leaves in the reference."""

    start: float
    count: int
    total: np.ndarray
    terms: dict[str, int]


class Reference:
    """The last K judged windows, pooled."""

    def __init__(self, size: int, past: Iterable[Past] = ()) -> None:
        self.size = size
        self.past: list[Past] = list(past)[-size:]

    def __len__(self) -> int:
        return len(self.past)

    def push(self, window: Window) -> None:
        kept = dict(window.terms.most_common(KEPT_TERMS))
        self.past = [*self.past, Past(window.start, window.count, window.total_or_zero(),
                                      kept)][-self.size:]

    def count(self) -> int:
        return sum(p.count for p in self.past)

    def centroid(self) -> np.ndarray | None:
        if not self.past:
            return None
        return sum((p.total for p in self.past), np.zeros_like(self.past[0].total)) / self.count()

    def terms(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for p in self.past:
            out.update(p.terms)
        return out


def centroid_score(window: Window, ref: Reference) -> float | None:
    """||window mean - reference mean||^2 over the variance that difference would have if
    both were drawn from the reference's distribution: about 1 for a stationary stream of
    independent documents, whatever the window sizes; a change of topic multiplies it."""
    mu = ref.centroid()
    if mu is None or not window.count:
        return None
    spread = max(1.0 - float(mu @ mu), 1e-6)  # E||x - mu||^2 for unit vectors
    noise = spread * (1.0 / window.count + 1.0 / ref.count())
    diff = window.mean() - mu
    return float(diff @ diff) / noise


def cosine_distance(vector: np.ndarray, centroid: np.ndarray) -> float:
    norm = float(np.linalg.norm(centroid))
    return 1.0 - float(vector @ centroid) / norm if norm > 0 else 1.0


def z_score(value: float, history: list[float], std_floor: float) -> tuple[float, float, float]:
    """(z, mean, std) of `value` against `history`; the std has a floor, so a history of
    near-equal values does not turn noise into an alarm."""
    mean = sum(history) / len(history)
    var = sum((h - mean) ** 2 for h in history) / max(len(history) - 1, 1)
    std = max(math.sqrt(var), std_floor)
    return (value - mean) / std, mean, std


def responsible_terms(window: Counter[str], history: Counter[str], top: int) -> list[str]:
    """The window's terms that most raise its share over the history's: each term's part of
    the KL divergence of the window's term distribution from the history's (add-one smoothed),
    among terms the window holds at least twice and half as often again as the history."""
    w_total, h_total = sum(window.values()), sum(history.values())
    vocab = len(set(window) | set(history)) or 1
    scored = []
    for term, n in window.items():
        if n < 2:
            continue
        p = n / w_total
        q = (history.get(term, 0) + 1) / (h_total + vocab)
        if p > 1.5 * q:  # a share barely above the history's says nothing
            scored.append((p * math.log(p / q), term))
    return [t for _, t in sorted(scored, reverse=True)[:top]]
