"""`streamrag topics`: the counts table, and the local check for running workers that
`--grow` refuses on whatever the broker says about group members."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from services.cli.topics import running_workers, show


def test_show_names_counts_settings_and_groups() -> None:
    lines = show({"docs.parsed.v1": 6, "search.replies.v1": 4}).splitlines()
    parsed = next(line for line in lines if line.startswith("docs.parsed.v1 "))
    assert parsed.split() == ["docs.parsed.v1", "6", "4", "documents", "(streamrag", "topics",
                              "--grow)"]
    replies = next(line for line in lines if line.startswith("search.replies.v1 "))
    assert replies.split() == ["search.replies.v1", "4", "4", "telemetry"]
    anchors = next(line for line in lines if line.startswith("ledger.anchors.v1 "))
    assert anchors.split() == ["ledger.anchors.v1", "none", "1", "single"]


def test_running_workers_are_the_live_service_processes_of_the_run_dir(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               "services.onebox"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                              "kafka.Kafka"])
    gone = subprocess.Popen([sys.executable, "-c", "pass", "services.ingest"])
    gone.wait()
    try:
        (pids / "onebox.pid").write_text(str(worker.pid))
        (pids / "broker.pid").write_text(str(other.pid))  # the broker must stay up
        (pids / "ingest.pid").write_text(str(gone.pid))
        (pids / "empty.pid").write_text("")
        assert running_workers(tmp_path) == [f"onebox (pid {worker.pid}, {pids})"]
    finally:
        for p in (worker, other):
            p.kill()
            p.wait()
    assert running_workers(tmp_path) == []
    assert running_workers(tmp_path / "never-ran") == []
