"""The guard fails safe, as properties over sequences of windows: the main variant is never
taken out of traffic, a breach every variant shares moves nothing, calls in flight past the
objective and calls their callers gave up on count against the variant that served them,
and a variant too thin to judge is reported with the traffic it needs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.guard.objectives import Figures, Objectives, reference
from services.inference.guard.tiers import AUTHOR, Decision, Guard, mains, routed
from shared.contract.query_config import QueryConfig

W = 30.0
OBJ = Objectives()  # p99 1,200 ms, 5 % errors, 10 calls to judge


def config(version: int, **weights: int) -> QueryConfig:
    return QueryConfig.model_validate({
        "version": version, "author": "ann", "at": 0.0,
        "variants": {n: {"weight": w, **({"overrides": {"answer_mode": "generative"}}
                                         if n == "canary" else {})}
                     for n, w in weights.items()}})


def figures() -> st.SearchStrategy[Figures]:
    def build(calls: int, slow: int, errors: int, overdue: int, hit: float | None) -> Figures:
        slow, overdue = min(slow, calls), min(overdue, slow, calls)
        return Figures(calls=calls, slow=slow, errors=min(errors, calls), overdue=overdue,
                       p99_ms=1722.0 if slow else 300.0, probe_hit_rate=hit)
    return st.builds(build, st.integers(0, 40), st.integers(0, 40), st.integers(0, 10),
                     st.integers(0, 40), st.none() | st.sampled_from([0.0, 0.5, 1.0]))


def simulate(guard: Guard, cfg: QueryConfig, windows: list[dict[str, Figures]],
             ) -> list[tuple[QueryConfig, Decision]]:
    """Close each window under the applied version, applying each version the guard writes
    as the runner does; every decision with the version it was made under."""
    out = []
    for i, figs in enumerate(windows):
        names = {*routed(cfg), *(n for n in [reference(cfg)] if n)}
        window = {n: f for n, f in figs.items() if n in names}
        for decision in guard.close_window(i * W, (i + 1) * W, window, cfg):
            out.append((cfg, decision))
            if decision.content is not None:
                cfg = QueryConfig.model_validate({
                    "version": cfg.version + 1, "author": AUTHOR, "at": 0.0,
                    "rollback_of": decision.rollback_of, **decision.content})
    return out


@settings(max_examples=300, deadline=None)
@given(weights=st.tuples(st.integers(1, 100), st.integers(1, 100)), n=st.integers(1, 4),
       rollback_main=st.booleans(),
       windows=st.lists(st.tuples(figures(), figures()), min_size=1, max_size=25))
def test_the_main_variant_is_never_taken_out_of_traffic(
        weights: tuple[int, int], n: int, rollback_main: bool,
        windows: list[tuple[Figures, Figures]]) -> None:
    guard = Guard(OBJ, consecutive=n, grace_s=W, rollback_main=rollback_main)
    cfg = config(2, stable=weights[0], canary=weights[1])
    decisions = simulate(guard, cfg, [{"stable": s, "canary": c} for s, c in windows])
    for applied, d in decisions:
        if d.kind == "stop":
            assert d.variant not in mains(applied)
            assert d.content is not None
            assert all(d.content["variants"][m]["weight"] > 0 for m in mains(applied))
        if d.content is not None:  # whatever is written routes to some variant
            assert any(v["weight"] > 0 for v in d.content["variants"].values())


@settings(max_examples=300, deadline=None)
@given(weights=st.tuples(st.integers(1, 100), st.integers(1, 100)), n=st.integers(1, 4),
       rollback_main=st.booleans(), windows=st.lists(figures(), min_size=1, max_size=25))
def test_a_breach_every_variant_shares_moves_no_traffic(
        weights: tuple[int, int], n: int, rollback_main: bool,
        windows: list[Figures]) -> None:
    """A machine-wide slowdown: every variant's window alike. Reported, never acted on."""
    guard = Guard(OBJ, consecutive=n, grace_s=W, rollback_main=rollback_main)
    cfg = config(2, stable=weights[0], canary=weights[1])
    decisions = simulate(guard, cfg, [{"stable": f, "canary": f} for f in windows])
    assert all(d.tier == 0 and d.content is None for _, d in decisions)
    run = longest = 0
    for f in windows:  # a window too thin to judge neither extends a run nor ends it
        if f.calls >= OBJ.min_calls:
            run = run + 1 if f.p99_slow() or f.error_rate > 0.05 else 0
            longest = max(longest, run)
    assert any(d.kind == "shared" for _, d in decisions) == (longest >= n)


def test_the_reported_slowdown_keeps_the_main_variant_routed() -> None:
    """Stable 85 / canary 15, stable's p99 just over the objective for three windows (the
    canary too thin to judge): an alert, no version written."""
    guard = Guard(OBJ, consecutive=3)
    cfg = config(2, stable=85, canary=15)
    stable = [Figures(calls=60, slow=2, p99_ms=ms) for ms in (1218.0, 1218.0, 1722.0)]
    canary = Figures(calls=6, slow=1, p99_ms=2048.0)
    decisions = simulate(guard, cfg, [{"stable": s, "canary": canary} for s in stable])
    [(_, alert)] = [(c, d) for c, d in decisions if d.kind != "samples"]
    assert (alert.tier, alert.kind, alert.variant, alert.content) == (0, "alert", "stable", None)
    assert "never set to 0" in alert.note


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 4), hung=st.lists(st.integers(OBJ.min_calls, 40), min_size=1,
                                          max_size=6),
       cancelled=st.booleans())
def test_calls_in_flight_past_the_objective_or_given_up_on_are_the_variants_breach(
        n: int, hung: list[int], cancelled: bool) -> None:
    """A canary whose calls hang: no call of it ever finishes, yet each window counts its
    calls in flight past the objective (or those its callers cancelled) against it."""
    guard = Guard(OBJ, consecutive=n, grace_s=1e9)
    cfg = config(2, stable=85, canary=15)
    stable = Figures(calls=80, p99_ms=300.0)
    canary = [Figures(calls=k, errors=k, cancelled=k) if cancelled
              else Figures(calls=k, slow=k, overdue=k, p99_ms=2 ** 18) for k in hung]
    decisions = simulate(guard, cfg, [{"stable": stable, "canary": c} for c in canary])
    stops = [d for _, d in decisions if d.kind == "stop"]
    assert len(stops) == (1 if len(hung) >= n else 0)
    if stops:
        assert stops[0].variant == "canary"
        assert stops[0].windows[0].breaches == (("error_rate",) if cancelled else ("p99",))


@settings(max_examples=200, deadline=None)
@given(weight=st.integers(1, 49), calls=st.integers(0, OBJ.min_calls - 1),
       n=st.integers(1, 4), extra=st.integers(0, 10))
def test_a_variant_too_thin_to_judge_is_reported_once_with_the_traffic_it_needs(
        weight: int, calls: int, n: int, extra: int) -> None:
    guard = Guard(OBJ, consecutive=n)
    cfg = config(2, stable=100 - weight, canary=weight)
    stable = Figures(calls=200, p99_ms=300.0)
    canary = Figures(calls=calls, p99_ms=300.0)
    decisions = simulate(guard, cfg, [{"stable": stable, "canary": canary}] * (n + extra))
    [(_, notice)] = decisions
    assert (notice.tier, notice.kind, notice.variant, notice.content) == (0, "samples",
                                                                        "canary", None)
    assert notice.needed_qps is not None
    assert abs(notice.needed_qps - OBJ.min_calls / W / (weight / 100)) < 1e-9
    assert f"{calls} in the last 30 s window, {OBJ.min_calls} needed" in notice.note


def test_fifteen_percent_needs_two_point_two_queries_a_second() -> None:
    guard = Guard(OBJ, consecutive=1)
    [(_, notice)] = simulate(guard, config(2, stable=85, canary=15), [
        {"stable": Figures(calls=50), "canary": Figures(calls=4)}])
    assert "at weight 15 of 100 that needs 2.2 queries/s in all (there were 1.8/s)" \
        in notice.note


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 4), runs=st.lists(st.integers(0, 8), min_size=1, max_size=6),
       rollback_main=st.booleans())
def test_the_main_variants_own_breach_is_one_alert_per_run(
        n: int, runs: list[int], rollback_main: bool) -> None:
    """Runs of breaking windows of the stable variant alone, a clean window between them,
    under a version judged stable before: one alert per run of N or more, nothing written."""
    guard = Guard(OBJ, consecutive=n, rollback_main=rollback_main)
    cfg = config(2, stable=85, canary=15)
    ok = {"stable": Figures(calls=80, p99_ms=300.0), "canary": Figures(calls=20, p99_ms=300.0)}
    bad = {**ok, "stable": Figures(calls=80, slow=80, p99_ms=2048.0)}
    windows = [ok, ok]  # judged stable
    for length in runs:
        windows += [bad] * length + [ok]
    decisions = simulate(guard, cfg, windows)
    assert [(d.tier, d.kind, d.variant) for _, d in decisions] == \
        [(0, "alert", "stable")] * sum(1 for length in runs if length >= n)


def test_a_main_breach_under_a_version_never_judged_stable_rolls_back_where_configured(
        ) -> None:
    ok = {"stable": Figures(calls=80, p99_ms=300.0), "canary": Figures(calls=20, p99_ms=300.0)}
    bad = {**ok, "stable": Figures(calls=80, slow=80, p99_ms=2048.0)}
    for rollback_main, expect in ((True, [(2, "rollback", 2)]), (False, [(0, "alert", None)])):
        guard = Guard(OBJ, consecutive=2, rollback_main=rollback_main)
        simulate(guard, config(2, stable=100), [ok, ok])
        decisions = simulate(guard, config(3, stable=85, canary=15), [bad, bad])
        assert [(d.tier, d.kind, d.rollback_of) for _, d in decisions] == expect


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 4), thin=st.lists(st.booleans(), min_size=4, max_size=12))
def test_a_window_too_thin_to_judge_neither_extends_nor_ends_a_run(
        n: int, thin: list[bool]) -> None:
    """A hanging canary whose traffic hovers about the minimum: windows with too few calls
    in between do not save it."""
    guard = Guard(OBJ, consecutive=n, grace_s=1e9)
    cfg = config(2, stable=85, canary=15)
    stable = Figures(calls=80, p99_ms=300.0)
    hung, few = Figures(calls=12, slow=12, overdue=12), Figures(calls=3, slow=3, overdue=3)
    windows = [{"stable": stable, "canary": few if t else hung} for t in thin]
    stops = [d for _, d in simulate(guard, cfg, windows) if d.kind == "stop"]
    assert len(stops) == (1 if thin.count(False) >= n else 0)
    if stops:
        assert all(w.figures == hung for w in stops[0].windows)
