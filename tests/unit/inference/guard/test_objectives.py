"""Window figures judged against the objectives: p99, error rate, quality vs the reference."""

from __future__ import annotations

from services.inference.guard.objectives import (
    CLICKS,
    ERROR_RATE,
    P99,
    PROBE,
    Figures,
    Objectives,
    breaches,
    judge,
    reference,
)
from services.inference.telemetry.latency import bucket_of, stats
from shared.contract.query_config import QueryConfig

OBJ = Objectives()


def config(**weights: int) -> QueryConfig:
    return QueryConfig.model_validate({"version": 2, "author": "a", "at": 0.0, "variants": {
        n: {"weight": w} for n, w in weights.items()}})


def test_p99_from_the_latency_buckets_breaks_above_the_objective() -> None:
    slow = [100.0] * 98 + [1500.0] * 2  # the 99th of 100 calls is 1.5 s
    counts = [0] * 72
    for ms in slow:
        counts[bucket_of(ms)] += 1
    p99 = stats(lambda b: counts[b]).p99_ms
    assert p99 > 1200
    assert breaches(Figures(calls=100, p99_ms=p99), None, OBJ) == (P99,)
    fast = Figures(calls=100, p99_ms=stats(lambda b: 100 if b == bucket_of(900) else 0).p99_ms)
    assert breaches(fast, None, OBJ) == ()


def test_error_rate_and_too_few_calls() -> None:
    assert breaches(Figures(calls=100, errors=6, p99_ms=10), None, OBJ) == (ERROR_RATE,)
    assert breaches(Figures(calls=100, errors=5, p99_ms=10), None, OBJ) == ()
    # 9 calls: neither p99 nor the error rate is judged
    assert breaches(Figures(calls=9, errors=9, p99_ms=5000), None, OBJ) == ()


def test_quality_is_relative_to_the_reference_variant() -> None:
    ref = Figures(probe_hit_rate=0.9)
    assert breaches(Figures(probe_hit_rate=0.71), ref, OBJ) == (PROBE,)
    assert breaches(Figures(probe_hit_rate=0.73), ref, OBJ) == ()
    # a corpus where every variant finds little is not a breach
    assert breaches(Figures(probe_hit_rate=0.0), Figures(probe_hit_rate=0.0), OBJ) == ()
    # no reference (the reference itself, or no variants): quality is not judged
    assert breaches(Figures(probe_hit_rate=0.0), None, OBJ) == ()


def test_click_share_needs_enough_feedback() -> None:
    ref = Figures(clicks=8, skips=2)
    assert breaches(Figures(clicks=2, skips=8), ref, OBJ) == (CLICKS,)
    assert breaches(Figures(clicks=0, skips=9), ref, OBJ) == ()  # 9 < min_feedback


def test_reference_is_the_largest_weight_and_judge_spares_it() -> None:
    cfg = config(stable=90, canary=10)
    assert reference(cfg) == "stable"
    assert reference(config(b=5, a=5)) == "a"
    assert reference(None) is None
    verdicts = judge({"stable": Figures(probe_hit_rate=1.0),
                      "canary": Figures(probe_hit_rate=0.0)}, cfg, OBJ)
    assert verdicts == {"stable": (), "canary": (PROBE,)}


def test_samples_add_up_to_the_window_figures() -> None:
    from collections import Counter

    from services.inference.guard.samples import GuardSample, figures, table_keys

    counts: Counter[str] = Counter()
    events = [("call", 50.0, False)] * 98 + [("error", 2000.0, False)] * 2 \
        + [("probe", 0.0, True)] * 3 + [("probe", 0.0, False)] + [("click", 0.0, False)]
    for kind, ms, hit in events:
        counts.update(table_keys(GuardSample(variant="canary", kind=kind, at=0.0,
                                             latency_ms=ms, hit=hit)))
    fig = figures("canary", lambda key: counts[key])
    assert fig is not None
    assert (fig.calls, fig.errors, fig.probe_hit_rate, fig.clicks) == (100, 2, 0.75, 1)
    assert fig.p99_ms > 1200 and fig.error_rate == 0.02
    assert figures("stable", lambda key: counts[key]) is None
