"""A restarted worker's detectors judge at once: the references survive a snapshot."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from services.retrieval.drift.detector import DriftConfig, Monitor, Sample
from services.retrieval.drift.snapshot import restore, save
from tests.unit.retrieval.drift.synthetic import docs, topic

KEY = ("crm", "support", "m")


def feed(monitor: Monitor, windows: list[np.ndarray], first: int = 0) -> list[str]:
    statuses = []
    for k, vectors in enumerate(windows, start=first):
        for j, v in enumerate(vectors):
            at = (k + (j + 0.5) / len(vectors)) * 60.0
            statuses += [r.status for r in monitor.add(KEY, Sample(f"{k}/{j}", 1, at, v,
                                                                   {"word": 1}))]
    return statuses


def test_a_restored_monitor_goes_on_judging_as_the_one_it_was_saved_from(
        tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    old, new = topic(rng), topic(rng)
    monitor = Monitor(DriftConfig())
    feed(monitor, [docs(rng, old, 30) for _ in range(9)])  # window 8 is still open
    path = tmp_path / "drift.json"
    save(monitor, path)
    restored = restore(path, DriftConfig())
    before, after = monitor.detectors[KEY], restored.detectors[KEY]
    assert after.scores == before.scores and after.horizon == before.horizon == 480.0
    np.testing.assert_allclose(after.reference.centroid(), before.reference.centroid(),
                               atol=1e-6)
    # no warm-up after the restart: the switch two windows on is an event at once
    tail = [docs(rng, old, 30), docs(rng, new, 30), docs(rng, old, 30)]
    assert feed(restored, tail, first=9)[-2:] == ["stable", "drift"]


def test_a_missing_or_unreadable_snapshot_is_an_empty_monitor(tmp_path: Path) -> None:
    assert not restore(tmp_path / "none.json", DriftConfig()).detectors
    (tmp_path / "bad.json").write_text("{not json")
    assert not restore(tmp_path / "bad.json", DriftConfig()).detectors
