"""Watermarks and lateness: pure clock arithmetic per source and partition."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.ingest.watermarks import (
    LATENESS_EDGES_S,
    bucket_of,
    clock_key,
    observe,
    summarize,
)

T0 = 1_700_000_000.0


def run(times: list[float], applied: list[bool] | None = None, allowed: float = 60.0):  # noqa: ANN201
    clock, late = None, []
    for i, t in enumerate(times):
        seen = observe(clock, t, True if applied is None else applied[i], allowed)
        clock, late = seen.clock, [*late, seen.late]
    return clock, late


def test_a_change_behind_the_watermark_is_late_and_counted_when_applied() -> None:
    clock, late = run([T0, T0 + 100, T0 + 30, T0 + 50], applied=[True, True, True, False])
    # watermark after T0+100 is T0+40: T0+30 is late (applied), T0+50 is not
    assert late == [False, False, True, False]
    assert (clock["late"], clock["late_applied"], clock["seen"]) == (1, 1, 4)
    assert clock["max_event_time"] == T0 + 100
    assert clock["freshest_applied"] == T0 + 100


def test_freshest_applied_ignores_refused_changes() -> None:
    clock, _ = run([T0, T0 + 500], applied=[True, False])
    assert clock["freshest_applied"] == T0
    assert clock["max_event_time"] == T0 + 500


def test_lateness_lands_in_its_bucket() -> None:
    clock, _ = run([T0 + 1000, T0 + 1000, T0 + 995, T0 + 100])
    hist = dict(zip([*LATENESS_EDGES_S, "rest"], clock["lateness"], strict=True))
    assert hist[0.0] == 2  # the first and the equal one
    assert hist[10.0] == 1  # 5 s behind
    assert hist[3600.0] == 1  # 900 s behind
    assert bucket_of(86400.5) == len(LATENESS_EDGES_S)


def test_summary_takes_each_source_s_lowest_partition_watermark_and_freshest_change() -> None:
    a0, _ = run([T0 + 100])
    a1, _ = run([T0 + 300])
    b0, _ = run([T0 + 50], applied=[False])
    rows = summarize([(clock_key("crm", 0), a0), (clock_key("crm", 1), a1),
                      (clock_key("wiki@eu", 0), b0)], 60.0, now=T0 + 400)
    crm, wiki = rows
    assert (crm.source, crm.watermark, crm.partitions) == ("crm", T0 + 40, {0: T0 + 40,
                                                                          1: T0 + 240})
    assert crm.lag_s == 100.0 and crm.seen == 2
    assert wiki.source == "wiki@eu"  # an @ inside a source name stays in it
    assert wiki.lag_s is None  # nothing applied yet


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=50),
       st.floats(min_value=0, max_value=1e4))
def test_late_means_behind_max_seen_minus_allowed(offsets: list[float], allowed: float) -> None:
    clock, late = run([T0 + o for o in offsets], allowed=allowed)
    for i, o in enumerate(offsets):
        newest_before = max([T0 + x for x in offsets[:i]], default=T0 + o)
        assert late[i] == (T0 + o < newest_before - allowed)
    assert sum(clock["lateness"]) == len(offsets) == clock["seen"]
    assert clock["late"] == clock["late_applied"] == sum(late)
