"""One window's figures per variant and the objectives they are judged against.

Pure: the agent builds a Figures per variant at the close of each tumbling window (calls,
errors, calls over the latency objective and p99 from the latency buckets, the probe set's
hit rate and click share from feedback) and `breaches` names the objectives a variant broke.

Every variant is judged relative to the others in the same window (`judge`). Quality is
judged against the reference variant (the one with the largest weight: the configuration's
stable share), never as an absolute number, since what a good hit rate is depends on the
corpus. Latency and errors have absolute objectives, but a breach the reference shares is
the machine's or the mesh's, not the variant's (`shared`): it is reported, and moves no
traffic, unless the variant is markedly worse than the reference in that window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from shared.contract.query_config import QueryConfig

P99 = "p99"
ERROR_RATE = "error_rate"
PROBE = "probe_hit_rate"
CLICKS = "click_share"
ABSOLUTE = (P99, ERROR_RATE)
# A variant whose share of slow (or failed) calls is more than this many times the
# reference's breaks the objective on its own even when the reference breaks it too.
WORSE = 2.0


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
    """One variant over one window. `calls` counts finished calls, calls cancelled by their
    caller or deadline, and calls still in flight past the latency objective (once per
    window they stay in flight); `slow` those of them over the latency objective, as the
    instance that served each call judged it; `p99_ms` is read from the latency buckets, for
    the incident."""

    calls: int = 0
    errors: int = 0
    p99_ms: float = 0.0
    probe_hit_rate: float | None = None  # None: no probe ran for it in the window
    clicks: int = 0
    skips: int = 0
    slow: int = 0
    overdue: int = 0  # calls in flight past the objective
    cancelled: int = 0  # calls their caller cancelled or whose deadline passed

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0

    def p99_slow(self) -> bool:
        """Whether the p99 call (nearest rank) was over the objective: counted exactly from
        the calls each instance marked slow, not read from the buckets (an edge is up to
        19 % off, so a p99 shown as 1,218 ms may hold no call over 1,200)."""
        return self.calls > 0 and self.slow >= self.calls - math.ceil(0.99 * self.calls) + 1

    @property
    def slow_share(self) -> float:
        return self.slow / self.calls if self.calls else 0.0

    def judged(self, objectives: Objectives) -> bool:
        """Whether the window had calls enough to judge p99 and the error rate."""
        return self.calls >= objectives.min_calls

    def click_share(self, min_feedback: int) -> float | None:
        judged = self.clicks + self.skips
        return self.clicks / judged if judged >= min_feedback else None

    def quality(self, objectives: Objectives) -> dict[str, float]:
        """The quality signals this window has, by name."""
        signals = {PROBE: self.probe_hit_rate,
                   CLICKS: self.click_share(objectives.min_feedback)}
        return {name: value for name, value in signals.items() if value is not None}

    def bad_share(self, objective: str) -> float:
        """The share of calls that count against a latency or error objective."""
        return self.slow_share if objective == P99 else self.error_rate


def reference(config: QueryConfig | None) -> str | None:
    """The variant others' quality is judged against: the largest weight (ties: name)."""
    if config is None or not config.variants:
        return None
    return min(config.variants, key=lambda n: (-config.variants[n].weight, n))


def breaches(figures: Figures, ref: Figures | None, objectives: Objectives) -> tuple[str, ...]:
    """The objectives `figures` broke, absolutely; `ref` is the reference variant's window
    (None for the reference itself, or where there is none: quality is then not judged)."""
    out = []
    if figures.judged(objectives):
        if figures.p99_slow():
            out.append(P99)
        if figures.error_rate > objectives.max_error_rate:
            out.append(ERROR_RATE)
    if ref is not None:
        mine, theirs = figures.quality(objectives), ref.quality(objectives)
        out.extend(name for name in (PROBE, CLICKS) if name in mine and name in theirs
                   and mine[name] < objectives.quality_ratio * theirs[name])
    return tuple(out)


def judged(figures: Figures, ref: Figures | None, objectives: Objectives) -> bool:
    """Whether the window says anything of the variant: calls enough for p99 and the error
    rate, or a quality signal the reference has too (`ref`: None for the reference)."""
    if figures.judged(objectives):
        return True
    return ref is not None and bool(set(figures.quality(objectives))
                                    & set(ref.quality(objectives)))


@dataclass(frozen=True)
class Verdict:
    """One variant's window, judged against the others."""

    own: tuple[str, ...] = ()  # objectives it broke on its own: a reason to act on it
    shared: tuple[str, ...] = ()  # objectives it broke that the others broke as well

    @property
    def broken(self) -> tuple[str, ...]:
        return (*self.own, *self.shared)


def judge(window: Mapping[str, Figures], config: QueryConfig | None,
          objectives: Objectives) -> dict[str, Verdict]:
    """Every variant of the window with the objectives it broke, each on its own or shared.

    The reference's absolute breaches are shared when another variant judged in the window
    broke them too, else its own (where no other variant could be judged, nothing says the
    machine is to blame, but the reference is never taken out of traffic: tiers.py). Another
    variant's absolute breach is shared when the reference broke it as well and the variant
    is not markedly worse (WORSE) than the reference; a variant judged alone breaks on its
    own, since stopping a canary is the safe direction."""
    ref_name = reference(config) if config is not None and config.variants else None
    if ref_name is None and len(window) == 1:
        ref_name = next(iter(window))  # "base": no variants
    ref = window.get(ref_name) if ref_name is not None else None
    ref_broken = breaches(ref, None, objectives) if ref is not None else ()
    out: dict[str, Verdict] = {}
    for name, fig in window.items():
        if name == ref_name:
            continue
        broken = breaches(fig, ref, objectives)
        shared = tuple(b for b in broken if ref is not None and b in ref_broken
                       and fig.bad_share(b) <= WORSE * ref.bad_share(b))
        out[name] = Verdict(tuple(b for b in broken if b not in shared), shared)
    if ref_name is not None and ref is not None:
        others = {b for v in out.values() for b in v.broken}
        out[ref_name] = Verdict(tuple(b for b in ref_broken if b not in others),
                                tuple(b for b in ref_broken if b in others))
    return out
