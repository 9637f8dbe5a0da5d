"""Percentiles and summaries of latency samples."""

from __future__ import annotations

import statistics


def pct(xs: list[float], p: float) -> float:
    """The p-th percentile by nearest rank; nan for no samples."""
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))] if s else float("nan")


def summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50": pct(xs, 50), "p95": pct(xs, 95), "p99": pct(xs, 99),
            "mean": statistics.fmean(xs) if xs else float("nan")}

