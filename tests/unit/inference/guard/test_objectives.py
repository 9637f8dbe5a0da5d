"""Window figures judged against the objectives and each other: p99, error rate, quality vs
the reference; a breach the reference shares is no variant's own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.guard.objectives import (
    CLICKS,
    ERROR_RATE,
    P99,
    PROBE,
    Figures,
    Objectives,
    Verdict,
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


def test_p99_breaks_when_the_p99_call_was_slow_counted_exactly() -> None:
    # 100 calls: the 99th smallest is over the objective once 2 of them are.
    assert breaches(Figures(calls=100, slow=2), None, OBJ) == (P99,)
    assert breaches(Figures(calls=100, slow=1), None, OBJ) == ()
    # 10 calls: the p99 call is the slowest one.
    assert breaches(Figures(calls=10, slow=1), None, OBJ) == (P99,)
    # The buckets alone do not decide: 1,100 ms calls read back as a p99 of 1,218 ms (the
    # bucket's upper edge), yet none of them was over 1,200 ms.
    counts = [0] * 72
    counts[bucket_of(1100.0)] = 100
    p99 = stats(lambda b: counts[b]).p99_ms
    assert 1200 < p99 < 1220
    assert breaches(Figures(calls=100, p99_ms=p99, slow=0), None, OBJ) == ()


def test_error_rate_and_too_few_calls() -> None:
    assert breaches(Figures(calls=100, errors=6, p99_ms=10), None, OBJ) == (ERROR_RATE,)
    assert breaches(Figures(calls=100, errors=5, p99_ms=10), None, OBJ) == ()
    # 9 calls: neither p99 nor the error rate is judged
    assert breaches(Figures(calls=9, errors=9, p99_ms=5000, slow=9), None, OBJ) == ()


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
    assert verdicts == {"stable": Verdict(), "canary": Verdict(own=(PROBE,))}


SLOW = Figures(calls=40, p99_ms=1722.0, slow=40)  # every call over the objective
FAST = Figures(calls=40, p99_ms=300.0)


def test_a_breach_the_reference_shares_is_shared_not_the_variants() -> None:
    cfg = config(stable=85, canary=15)
    verdicts = judge({"stable": SLOW, "canary": SLOW}, cfg, OBJ)
    assert verdicts == {"stable": Verdict(shared=(P99,)), "canary": Verdict(shared=(P99,))}
    # the reference alone: its own (never a reason to stop it: tiers.py)
    assert judge({"stable": SLOW, "canary": FAST}, cfg, OBJ)["stable"] == Verdict(own=(P99,))
    # the canary alone, or with a reference too thin to judge: the canary's own
    assert judge({"stable": FAST, "canary": SLOW}, cfg, OBJ)["canary"] == Verdict(own=(P99,))
    thin = Figures(calls=3, slow=3)
    assert judge({"stable": thin, "canary": SLOW}, cfg, OBJ)["canary"] == Verdict(own=(P99,))


def test_a_variant_markedly_worse_than_a_breaking_reference_breaks_on_its_own() -> None:
    cfg = config(stable=85, canary=15)
    one_slow = Figures(calls=40, slow=1)  # the reference's p99 call slow: 2.5 % of its calls
    hung = Figures(calls=12, slow=12, overdue=12)  # every canary call hangs
    verdicts = judge({"stable": one_slow, "canary": hung}, cfg, OBJ)
    assert verdicts == {"stable": Verdict(shared=(P99,)), "canary": Verdict(own=(P99,))}
    errors = judge({"stable": Figures(calls=40, errors=4),
                    "canary": Figures(calls=40, errors=8)}, cfg, OBJ)  # 10 % vs 20 %
    assert errors["canary"] == Verdict(shared=(ERROR_RATE,))


def figs() -> st.SearchStrategy[Figures]:
    return st.builds(lambda calls, slow, errors, hit: Figures(
        calls=calls, slow=min(slow, calls), errors=min(errors, calls), probe_hit_rate=hit),
        st.integers(0, 60), st.integers(0, 60), st.integers(0, 60),
        st.none() | st.floats(0, 1))


@settings(max_examples=300, deadline=None)
@given(fig=figs(), weights=st.tuples(st.integers(1, 100), st.integers(1, 100)))
def test_a_breach_every_variant_shares_equally_is_never_a_variants_own(
        fig: Figures, weights: tuple[int, int]) -> None:
    cfg = config(stable=weights[0], canary=weights[1])
    verdicts = judge({"stable": fig, "canary": fig}, cfg, OBJ)
    assert all(not (set(v.own) & {P99, ERROR_RATE}) for v in verdicts.values())
    assert set(verdicts["stable"].shared) == set(verdicts["canary"].shared) \
        == set(breaches(fig, None, OBJ))


@settings(max_examples=300, deadline=None)
@given(stable=figs(), canary=figs())
def test_relative_judging_never_invents_a_breach(stable: Figures, canary: Figures) -> None:
    cfg = config(stable=85, canary=15)
    verdicts = judge({"stable": stable, "canary": canary}, cfg, OBJ)
    assert set(verdicts["stable"].broken) == set(breaches(stable, None, OBJ))
    assert set(verdicts["canary"].broken) == set(breaches(canary, stable, OBJ))


def test_samples_add_up_to_the_window_figures() -> None:
    from collections import Counter

    from services.inference.guard.samples import GuardSample, figures, table_keys

    counts: Counter[str] = Counter()
    events = [("call", 50.0, False)] * 96 + [("error", 2000.0, False)] * 2 \
        + [("overdue", 1300.0, False), ("cancelled", 700.0, False)] \
        + [("probe", 0.0, True)] * 3 + [("probe", 0.0, False)] + [("click", 0.0, False)]
    for kind, ms, hit in events:
        counts.update(table_keys(GuardSample(variant="canary", kind=kind, at=0.0,
                                             latency_ms=ms, slow=ms > 1200, hit=hit)))
    fig = figures("canary", lambda key: counts[key])
    assert fig is not None
    assert (fig.calls, fig.errors, fig.probe_hit_rate, fig.clicks) == (100, 3, 0.75, 1)
    assert (fig.slow, fig.overdue, fig.cancelled) == (3, 1, 1)
    assert fig.p99_ms > 1200 and fig.error_rate == 0.03 and fig.p99_slow()
    assert figures("stable", lambda key: counts[key]) is None
