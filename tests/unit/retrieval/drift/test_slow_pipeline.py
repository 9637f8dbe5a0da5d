"""Drift windows survive a slow, uneven pipeline: partitions upstream minutes apart in pace,
stalling now and then. Fewer than 1 % of the samples may be dropped (the detector before
the grace scaled with the window and the slowest partition set the pace dropped about 17 %
of them in this same pipeline, and reported 41 % of its windows too_few_docs).

`pytest -s` prints the figures."""

from __future__ import annotations

from services.retrieval.drift.detector import Detector, DriftConfig
from tests.unit.retrieval.drift.synthetic import slow_pipeline

KEY = ("src", "dom", "model")


def test_a_slow_pipeline_loses_under_one_percent_of_its_samples() -> None:
    runs = [slow_pipeline(Detector(KEY, DriftConfig()), seed) for seed in range(5)]
    sent, dropped = sum(r.sent for r in runs), sum(r.dropped for r in runs)
    windows, too_few = sum(r.windows for r in runs), sum(r.too_few for r in runs)
    print(f"\nslow pipeline: {dropped} of {sent} samples dropped ({100 * dropped / sent:.2f} %), "
          f"{sum(r.late for r in runs)} arrived late; {too_few} of {windows} windows too_few_docs")
    assert sent > 3000 and dropped < 0.01 * sent
    # 25 documents a window against 20 needed: only the Poisson stream's thin windows
    # (about 11 % of them) are too few, not those the pipeline starved.
    assert too_few < 0.2 * windows


def test_a_late_sample_is_counted_in_the_next_open_window_not_dropped() -> None:
    """A partition that stalls longer than the pace allowed for: its samples reach windows
    that have closed, and are judged in the next one, each counted as late."""
    run = slow_pipeline(Detector(KEY, DriftConfig(grace_s=0.0)), seed=3)
    assert run.late > 0 and run.dropped == 0, run
