"""The guard's tiers: N consecutive breaking windows act once; grace, rollback, incidents."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.guard.objectives import Figures, Objectives
from services.inference.guard.tiers import AUTHOR, Guard, diff, routed
from shared.contract.query_config import QueryConfig

GOOD, BAD = Figures(probe_hit_rate=1.0), Figures(probe_hit_rate=0.0)
W = 30.0


def config(version: int, author: str = "ann", rollback_of: int | None = None,
           **weights: int) -> QueryConfig:
    return QueryConfig.model_validate({
        "version": version, "author": author, "at": 0.0, "rollback_of": rollback_of,
        "knobs": {"default_top_k": 5},
        "variants": {n: {"weight": w, **({"overrides": {"default_top_k": 1}}
                                         if n == "canary" else {})}
                     for n, w in weights.items()}})


def write(decision_content: dict, version: int, rollback_of: int | None = None,
          ) -> QueryConfig:
    return QueryConfig.model_validate({"version": version, "author": AUTHOR, "at": 0.0,
                                       "rollback_of": rollback_of, **decision_content})


def run(guard: Guard, cfg: QueryConfig | None, canary: list[Figures], t0: int = 0) -> list:
    out = []
    for i, fig in enumerate(canary):
        start = (t0 + i) * W
        out.extend(guard.close_window(start, start + W, {"stable": GOOD, "canary": fig}, cfg))
    return out


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 6), pattern=st.lists(st.booleans(), max_size=40))
def test_fewer_than_n_consecutive_breaches_never_act(n: int, pattern: list[bool]) -> None:
    guard = Guard(consecutive=n, grace_s=1e9)
    cfg = config(3, stable=90, canary=10)
    decisions = run(guard, cfg, [BAD if b else GOOD for b in pattern])
    longest = max((len(s) for s in "".join("x" if b else " " for b in pattern).split()),
                  default=0)
    assert bool(decisions) == (longest >= n)
    assert len(decisions) <= 1  # while the version stands, at most tier 1 once


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 5), extra=st.integers(0, 20))
def test_n_windows_act_once_then_roll_back_once(n: int, extra: int) -> None:
    guard = Guard(consecutive=n, grace_s=2 * W)
    baseline = config(2, stable=100)
    run(guard, baseline, [GOOD, GOOD])
    assert guard.stable_versions == (2,)
    bad = config(3, stable=90, canary=10)
    run(guard, bad, [GOOD])  # the first window under a version is never judged stable
    first = run(guard, bad, [BAD] * n, t0=3)
    assert [d.tier for d in first] == [1]
    tier1 = first[0]
    assert tier1.content is not None and tier1.content["variants"]["canary"]["weight"] == 0
    assert len(tier1.windows) == n and all(w.breaches == ("probe_hit_rate",)
                                           for w in tier1.windows)
    stopped = write(tier1.content, 4)
    assert routed(stopped) == ["stable"]
    # The canary keeps failing its probes while it gets no traffic: no second tier 1.
    later = run(guard, stopped, [BAD] * (2 + extra), t0=10)
    assert [d.tier for d in later] == [2]
    tier2 = later[0]
    assert tier2.rollback_of == 2 and tier2.content == baseline.content()
    assert tier2.incident == tier1.incident
    rolled = write(tier2.content, 5, rollback_of=2)
    assert run(guard, rolled, [BAD] * 10, t0=40) == []  # canary gone: nothing to judge


def test_grace_counts_from_tier_one() -> None:
    guard = Guard(consecutive=1, grace_s=3 * W)
    run(guard, config(2, stable=100), [GOOD, GOOD])
    [tier1] = run(guard, config(3, stable=90, canary=10), [BAD], t0=2)
    stopped = write(tier1.content or {}, 4)
    assert run(guard, stopped, [GOOD, GOOD], t0=3) == []
    assert [d.tier for d in run(guard, stopped, [GOOD], t0=5)] == [2]


def test_a_human_version_after_tier_one_is_not_rolled_back() -> None:
    guard = Guard(consecutive=1, grace_s=W)
    run(guard, config(2, stable=100), [GOOD, GOOD])
    run(guard, config(3, stable=90, canary=10), [BAD], t0=2)
    human = config(5, stable=50, other=50)
    [decision] = run(guard, human, [GOOD], t0=3)
    assert decision.tier == 2 and decision.content is None
    assert "followed the guard's" in decision.note


def test_no_stable_version_known_writes_nothing_at_tier_two() -> None:
    guard = Guard(consecutive=1, grace_s=0.0)
    [tier1] = run(guard, config(3, stable=90, canary=10), [BAD])
    [tier2] = run(guard, write(tier1.content or {}, 4), [GOOD], t0=1)
    assert tier2.content is None and "no version judged stable" in tier2.note


def test_the_only_routed_variant_is_reported_and_rolled_back_only_where_configured() -> None:
    slow = Figures(calls=50, p99_ms=5000.0, slow=50)
    ok = Figures(calls=50, p99_ms=100.0)
    base_ok = config(2)
    bad = config(3).model_copy(update={"knobs": config(3).knobs.model_copy(
        update={"shard_timeout_s": 0.001})})  # no variants: queries go to "base"
    for rollback_main, expect in ((False, [(0, "alert", None)]),
                                  (True, [(2, "rollback", 2)])):
        guard = Guard(Objectives(), consecutive=2, rollback_main=rollback_main)
        guard.close_window(0, W, {"base": ok}, base_ok)
        guard.close_window(W, 2 * W, {"base": ok}, base_ok)
        out = [d for i in range(3) for d in guard.close_window(
            (2 + i) * W, (3 + i) * W, {"base": slow}, bad)]
        assert [(d.tier, d.kind, d.rollback_of) for d in out] == expect
        assert all(d.variant == "base" for d in out)


def test_a_guard_version_is_never_the_stable_one() -> None:
    guard = Guard(consecutive=1, grace_s=10 * W)
    run(guard, config(2, stable=100), [GOOD, GOOD])
    [tier1] = run(guard, config(3, stable=90, canary=10), [BAD], t0=2)
    run(guard, write(tier1.content or {}, 4), [GOOD] * 5, t0=3)
    assert guard.stable_versions == (2,)


def test_diff_names_each_changed_leaf() -> None:
    old = config(3, stable=90, canary=10).content()
    new = config(2, stable=100).content()
    assert diff(old, new) == {"variants.canary": ({"weight": 10, "overrides": {
        "default_top_k": 1, "hybrid": None, "fusion_method": None, "rrf_k": None,
        "dense_weight": None, "lexical_weight": None, "feedback_weight": None,
        "feedback_max_boost": None, "rerank": None, "answer_mode": None,
        "default_max_new_tokens": None, "max_new_tokens_cap": None,
        "shard_timeout_s": None}}, None), "variants.stable.weight": (90, 100)}
