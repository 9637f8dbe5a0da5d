"""One window's figures per variant and the objectives they are judged against.

Pure: the agent builds a Figures per variant at the close of each tumbling window (calls,
errors and p99 from the latency buckets, the probe set's hit rate and click share from
feedback) and `breaches` names the objectives a variant broke. Quality is judged against
the reference variant (the one with the largest weight: the configuration's stable
share), never as an absolute number, since what a good hit rate is depends on the corpus.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.contract.query_config import QueryConfig

P99 = "p99"
ERROR_RATE = "error_rate"
PROBE = "probe_hit_rate"
CLICKS = "click_share"


@dataclass(frozen=True)
class Objectives:
    p99_ms: float = 1200.0
    max_error_rate: float = 0.05
    # A variant's quality signal below this share of the reference variant's breaks it.
    quality_ratio: float = 0.8
    min_calls: int = 10  # fewer calls in a window: p99 and error rate are not judged
    min_feedback: int = 10  # fewer clicks+skips: the click share is not judged


@dataclass(frozen=True)
class Figures:
    """One variant over one window."""

    calls: int = 0
    errors: int = 0
    p99_ms: float = 0.0
    probe_hit_rate: float | None = None  # None: no probe ran for it in the window
    clicks: int = 0
    skips: int = 0

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0

    def click_share(self, min_feedback: int) -> float | None:
        judged = self.clicks + self.skips
        return self.clicks / judged if judged >= min_feedback else None

    def quality(self, objectives: Objectives) -> dict[str, float]:
        """The quality signals this window has, by name."""
        signals = {PROBE: self.probe_hit_rate,
                   CLICKS: self.click_share(objectives.min_feedback)}
        return {name: value for name, value in signals.items() if value is not None}


def reference(config: QueryConfig | None) -> str | None:
    """The variant others' quality is judged against: the largest weight (ties: name)."""
    if config is None or not config.variants:
        return None
    return min(config.variants, key=lambda n: (-config.variants[n].weight, n))


def breaches(figures: Figures, ref: Figures | None, objectives: Objectives) -> tuple[str, ...]:
    """The objectives `figures` broke; `ref` is the reference variant's window (None for
    the reference itself, or where there is none: quality is then not judged)."""
    out = []
    if figures.calls >= objectives.min_calls:
        if figures.p99_ms > objectives.p99_ms:
            out.append(P99)
        if figures.error_rate > objectives.max_error_rate:
            out.append(ERROR_RATE)
    if ref is not None:
        mine, theirs = figures.quality(objectives), ref.quality(objectives)
        out.extend(name for name in (PROBE, CLICKS) if name in mine and name in theirs
                   and mine[name] < objectives.quality_ratio * theirs[name])
    return tuple(out)


def judge(window: Mapping[str, Figures], config: QueryConfig | None,
          objectives: Objectives) -> dict[str, tuple[str, ...]]:
    """Every variant of the window with the objectives it broke (empty: none)."""
    ref_name = reference(config)
    ref = window.get(ref_name) if ref_name is not None else None
    return {name: breaches(fig, None if name == ref_name else ref, objectives)
            for name, fig in window.items()}
