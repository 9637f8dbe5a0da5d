"""The drift detector on synthetic vectors: what it judges, when it alarms, what it names."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval.drift.detector import Detector, DriftConfig, Monitor, Sample
from tests.unit.retrieval.drift.synthetic import docs, feed, topic

KEY = ("crm", "support", "all-MiniLM-L6-v2")


def test_a_switch_of_topic_is_one_drift_event_in_the_switched_window() -> None:
    rng = np.random.default_rng(1)
    old, new = topic(rng), topic(rng)
    windows = [docs(rng, old, 30) for _ in range(12)] + [docs(rng, new, 30) for _ in range(8)]
    reports = feed(Detector(KEY, DriftConfig()), windows)
    assert [r.window_start / 60 for r in reports if r.status == "drift"] == [12]
    event = next(r for r in reports if r.status == "drift")
    assert event.z is not None and event.z > 2.5 and event.history == 10
    assert (event.source, event.domain, event.model_id) == KEY
    assert len(event.documents) == 3 and all(d.doc_id.startswith("w12") for d in event.documents)
    # the new regime is the reference from then on, judged at once (the statistic's
    # history is kept): stable, not drifting again as the old windows age out
    assert {r.status for r in reports[13:]} == {"stable"}


def test_the_documents_named_are_the_farthest_from_the_reference() -> None:
    rng = np.random.default_rng(2)
    old, new = topic(rng), topic(rng)
    last = docs(rng, old, 30)
    last[:4] = docs(rng, new, 4, spread=0.1)  # four documents of another topic
    last[4:8] = docs(rng, -old, 4, spread=0.1)  # four opposite to the reference: farthest
    windows = [docs(rng, old, 30) for _ in range(8)] + [last]
    reports = feed(Detector(KEY, DriftConfig(top_docs=4)), windows)
    assert reports[-1].status == "drift"
    assert sorted(d.doc_id for d in reports[-1].documents) == [f"w8d{i}" for i in range(4, 8)]


def test_the_words_named_are_those_the_window_has_more_of_than_its_history() -> None:
    rng = np.random.default_rng(3)
    old, new = topic(rng), topic(rng)
    windows = [docs(rng, old, 25) for _ in range(7)] + [docs(rng, new, 25)]
    words = [{"patient": 2, "cell": 1, "study": 1}] * 7 + [{"incident": 2, "disk": 1,
                                                           "study": 1}]
    reports = feed(Detector(KEY, DriftConfig()), windows, words)
    assert reports[-1].status == "drift"
    assert reports[-1].terms[:2] == ("incident", "disk")
    assert "study" not in reports[-1].terms and "patient" not in reports[-1].terms


def test_windows_with_too_few_documents_are_reported_but_not_judged_or_kept() -> None:
    rng = np.random.default_rng(4)
    old, new = topic(rng), topic(rng)
    windows = [docs(rng, old, 30) for _ in range(8)] + [docs(rng, new, 5)]
    detector = Detector(KEY, DriftConfig())
    reports = feed(detector, windows)
    assert reports[-1].status == "too_few_docs" and reports[-1].z is None
    assert len(detector.reference) == 8  # the small window left nothing behind


def test_no_judgement_before_the_reference_holds_min_history_scored_windows() -> None:
    rng = np.random.default_rng(5)
    old, new = topic(rng), topic(rng)
    windows = [docs(rng, old, 30) for _ in range(4)] + [docs(rng, new, 30)]
    reports = feed(Detector(KEY, DriftConfig(min_history=5)), windows)
    assert [r.status for r in reports] == ["warming_up"] * 5  # the switch came too early


def test_a_window_takes_samples_until_its_grace_then_the_next_one_takes_them_late() -> None:
    rng = np.random.default_rng(6)
    v = docs(rng, topic(rng), 7)
    detector = Detector(KEY, DriftConfig(min_docs=1, grace_s=10.0))
    detector.add(Sample("a", 1, 10.0, v[0], {}))
    detector.add(Sample("a", 1, 11.0, v[0], {}))  # the same version replayed
    assert detector.add(Sample("b", 1, 65.0, v[1], {})) == []  # next window, 0-60 still open
    detector.add(Sample("c", 1, 59.0, v[2], {}))  # out of order, within the grace: counted
    (first,) = detector.add(Sample("d", 1, 70.0, v[3], {}))  # 60 + grace: 0-60 closes
    assert (first.window_start, first.window_end, first.docs, first.late) == (0, 60, 2, 0)
    detector.add(Sample("e", 1, 58.0, v[4], {}))  # late: counted in the window still open
    detector.add(Sample("c", 1, 59.0, v[2], {}))  # a repeat of one 0-60 counted: ignored
    (second,) = detector.tick(120.0 + 10.0)
    assert (second.window_start, second.docs, second.late, second.dropped) == (60, 3, 1, 0)
    detector.add(Sample("f", 1, 30.0, v[5], {}))  # of a window closed a window ago: the past
    detector.add(Sample("g", 1, 125.0, v[6], {}))
    (third,) = detector.tick(180.0 + 10.0)
    assert (third.window_start, third.docs, third.late, third.dropped) == (120, 1, 1, 1)


def test_the_grace_scales_with_the_window_unless_set() -> None:
    assert DriftConfig(window_s=60.0).grace == 30.0
    assert DriftConfig(window_s=3600.0, grace_share=0.1).grace == 360.0
    assert DriftConfig(window_s=60.0, grace_s=5.0).grace == 5.0


def test_the_slowest_partition_sets_the_pace_not_the_newest_sample() -> None:
    """Two paces upstream: a fast partition 2 s behind, a slow one 40 s behind. A window
    stays open until the slow one's samples of it are in."""
    rng = np.random.default_rng(14)
    v = docs(rng, topic(rng), 4)
    detector = Detector(KEY, DriftConfig(min_docs=1, grace_s=10.0))
    detector.add(Sample("slow", 1, 50.0, v[0], {}), now=90.0)  # 40 s behind
    # The fast partition is 20 s into the next window plus the grace: 0-60 stays open.
    assert detector.add(Sample("fast", 1, 80.0, v[1], {}), now=82.0) == []
    assert detector.add(Sample("slow2", 1, 59.0, v[2], {}), now=99.0) == []
    (first,) = detector.tick(110.0)  # 60 + grace + the slow partition's 40 s
    assert (first.window_start, first.docs, first.late) == (0, 2, 0)


def test_an_idle_window_closes_only_after_its_grace() -> None:
    rng = np.random.default_rng(7)
    detector = Detector(KEY, DriftConfig(grace_s=10.0))
    detector.add(Sample("a", 1, 5.0, docs(rng, topic(rng), 1)[0], {}))
    assert detector.tick(69.0) == []
    assert [r.window_end for r in detector.tick(70.0)] == [60.0]
    assert detector.tick(200.0) == []


def test_a_quiet_key_closes_by_the_wall_clock_minus_the_pipelines_delay() -> None:
    rng = np.random.default_rng(12)
    detector = Detector(KEY, DriftConfig(grace_s=10.0))
    detector.add(Sample("a", 1, 5.0, docs(rng, topic(rng), 1)[0], {}), now=35.0)  # 30 s behind
    assert detector.tick(99.0) == []  # 60 + 10 of ingest time is 100 on the wall clock
    assert [r.window_end for r in detector.tick(100.0)] == [60.0]


def test_the_monitor_keeps_one_detector_per_key_and_drops_the_least_recent() -> None:
    rng = np.random.default_rng(8)
    monitor = Monitor(DriftConfig(max_keys=2))
    v = docs(rng, topic(rng), 1)[0]
    for source in ("a", "b", "a", "c"):
        monitor.add((source, "d", "m"), Sample("x", 1, 1.0, v, {}))
    assert list(monitor.detectors) == [("a", "d", "m"), ("c", "d", "m")]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(20, 80), min_size=30,
                                                     max_size=30),
       spread=st.floats(0.3, 2.0))
def test_a_stationary_stream_of_any_window_sizes_rarely_raises_an_event(
        seed: int, sizes: list[int], spread: float) -> None:
    # The statistic is normalised by the window and reference sizes, so windows of 20 and
    # of 80 documents from one distribution look alike to it.
    rng = np.random.default_rng(seed)
    c = topic(rng)
    reports = feed(Detector(KEY, DriftConfig()), [docs(rng, c, n, spread) for n in sizes])
    assert sum(r.status == "drift" for r in reports) <= 2  # of 24 judged windows
    assert sum(r.status in ("stable", "drift") for r in reports) == 30 - 6


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), at=st.integers(8, 20), shift=st.floats(0.5, 1.0))
def test_a_shift_of_the_centre_is_flagged_in_its_window(seed: int, at: int,
                                                       shift: float) -> None:
    rng = np.random.default_rng(seed)
    old = topic(rng)
    new = old + shift * topic(rng)
    new /= np.linalg.norm(new)
    windows = [docs(rng, old, 30) for _ in range(at)] + [docs(rng, new, 30) for _ in range(3)]
    reports = feed(Detector(KEY, DriftConfig()), windows)
    flagged = [int(r.window_start // 60) for r in reports if r.status == "drift"]
    # flagged in its window, even after a rare false alarm before it (about 0.3 % of the
    # windows judged on little history): the statistic's history outlives that alarm
    assert at in flagged and sum(w < at for w in flagged) <= 1, flagged


def test_a_replayed_late_sample_does_not_hold_quiet_windows_open() -> None:
    rng = np.random.default_rng(13)
    v = docs(rng, topic(rng), 3)
    detector = Detector(KEY, DriftConfig(grace_s=10.0, min_docs=1))
    detector.add(Sample("a", 1, 3605.0, v[0], {}), now=3606.0)
    detector.add(Sample("b", 1, 3675.0, v[1], {}), now=3676.0)  # closes 3600-3660
    detector.add(Sample("old", 1, 30.0, v[2], {}), now=3680.0)  # a replay, an hour behind
    assert detector.lag == 1.0  # its delay is not the pipeline's
    (closed,) = detector.tick(3731.0)
    assert (closed.window_end, closed.docs, closed.late, closed.dropped) == (3720.0, 1, 1, 1)


@settings(max_examples=50, deadline=None)
@given(times=st.lists(st.floats(0, 600), min_size=1, max_size=120),
       jitter=st.lists(st.floats(-20, 20), min_size=120, max_size=120),
       repeats=st.lists(st.booleans(), min_size=120, max_size=120))
def test_every_sample_is_counted_once_in_a_window_or_as_dropped(
        times: list[float], jitter: list[float], repeats: list[bool]) -> None:
    rng = np.random.default_rng(0)
    vectors = docs(rng, topic(rng), len(times))
    detector = Detector(KEY, DriftConfig(min_docs=1, grace_s=10.0))
    reports, sent = [], 0
    for i, t in enumerate(sorted(times)):  # ingest order, arriving out of order by jitter
        at = max(0.0, t + jitter[i])
        reports += detector.add(Sample(f"d{i}", 1, at, vectors[i], {}))
        sent += 1
        if repeats[i]:  # a repeat is never counted twice, nor dropped
            reports += detector.add(Sample(f"d{i}", 1, at, vectors[i], {}))
    reports += detector.tick(10_000.0)
    assert sum(r.docs for r in reports) + sum(r.dropped for r in reports) == sent
    assert all(r.dropped <= r.late for r in reports)
    assert sum(r.dropped for r in reports) == 0  # jitter under a window: none is the past
    assert [r.window_start for r in reports] == sorted({r.window_start for r in reports})
