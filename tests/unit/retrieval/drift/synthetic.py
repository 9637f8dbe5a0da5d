"""Synthetic unit vectors around a topic direction, streamed into a detector window by window."""

from __future__ import annotations

import numpy as np

from services.retrieval.drift.detector import Detector, Sample
from shared.contract.records import DriftReport

DIM = 64


def topic(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM)
    return v / np.linalg.norm(v)


def docs(rng: np.random.Generator, centre: np.ndarray, n: int, spread: float = 1.0,
         ) -> np.ndarray:
    """`n` unit vectors scattered around `centre` (spread: noise per dimension x sqrt(dim))."""
    v = centre + rng.normal(scale=spread / np.sqrt(DIM), size=(n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def feed(detector: Detector, windows: list[np.ndarray], words: list[dict[str, int]] | None = None,
         window_s: float = 60.0) -> list[DriftReport]:
    """Each array is one window's documents, spread evenly over it; then every window closes."""
    reports: list[DriftReport] = []
    for k, vectors in enumerate(windows):
        terms = (words or [{}] * len(windows))[k]
        for j, v in enumerate(vectors):
            at = (k + (j + 0.5) / len(vectors)) * window_s
            reports += detector.add(Sample(f"w{k}d{j}", 1, at, v, terms, f"doc {k}/{j}"))
    return reports + detector.tick(len(windows) * window_s + 3600)
