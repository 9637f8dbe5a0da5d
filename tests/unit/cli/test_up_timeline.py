"""`streamrag up` says where its start-up seconds went: each bring-up step, timed in order,
and the total to ready."""

from __future__ import annotations

import time
from pathlib import Path

from services.cli.mesh import Mesh
from services.cli.settings import MeshSettings
from shared.settings import KafkaSettings, LedgerSettings


def test_each_step_is_timed_from_the_one_before(tmp_path: Path) -> None:
    mesh = Mesh(MeshSettings(run_dir=tmp_path), KafkaSettings(), LedgerSettings())
    mesh._mark = time.monotonic()
    time.sleep(0.05)
    mesh._took("broker")
    mesh._took("chain")
    (first, a), (second, b) = mesh.timeline
    assert (first, second) == ("broker", "chain") and a >= 0.05 > b >= 0
    table = mesh.timeline_table().splitlines()
    assert table[0] == "start-up timeline:" and table[1].split()[0] == "broker"
    assert table[-1].split()[:2] == ["to", "ready"]
    assert float(table[-1].split()[2]) == round(a + b, 1)
