"""A child's pid file is replaced in one step, so a reader polling it during a restart
sees the old pid or the new one, never an empty file (a kill test read '' once)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from services.cli import procs


def test_a_pid_file_is_never_seen_empty_while_children_restart(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids" / "child.pid"
    seen: list[str] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            if pid_file.exists():
                seen.append(pid_file.read_text())

    reader = threading.Thread(target=poll)
    reader.start()
    children = []
    try:
        for _ in range(40):
            child = procs.spawn("child", [sys.executable, "-c", "pass"], tmp_path)
            children.append(child)
            child.popen.wait()
    finally:
        stop.set()
        reader.join()
    pids = {str(c.popen.pid) for c in children}
    assert seen and all(text in pids for text in seen), sorted(set(seen) - pids)[:3]
    assert pid_file.read_text() == str(children[-1].popen.pid)
