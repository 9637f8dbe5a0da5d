"""services/cli/exits.py: a mesh process is stopped however the parent leaves."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from services.cli.exits import stopped_on_exit
from services.cli.procs import Child, spawn

# "services." in the command line is what marks a process as the mesh's (procs._is_ours).
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)", "services.fake"]


def sleeper(run_dir: Path) -> Child:
    return spawn("fake", SLEEPER, run_dir)


def test_ctrl_c_inside_stops_a_process_the_supervisor_never_knew(tmp_path: Path) -> None:
    child = sleeper(tmp_path)
    reported: list[list[str]] = []
    with pytest.raises(KeyboardInterrupt), stopped_on_exit(tmp_path, reported.append):
        raise KeyboardInterrupt
    assert child.popen.wait(timeout=30) == -signal.SIGTERM
    assert reported == [["fake"]]
    assert not (tmp_path / "pids/fake.pid").exists()


def test_sigterm_unwinds_like_ctrl_c_and_handlers_come_back(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    child = sleeper(tmp_path)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), stopped_on_exit(tmp_path):
        os.kill(os.getpid(), signal.SIGTERM)
    assert child.popen.wait(timeout=30) == -signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_clean_exit_after_the_mesh_stopped_itself_reports_nothing(tmp_path: Path) -> None:
    child = sleeper(tmp_path)
    child.popen.terminate()
    child.popen.wait(timeout=30)
    (tmp_path / "pids/fake.pid").unlink()  # what procs.stop does for a stopped child
    reported: list[list[str]] = []
    with stopped_on_exit(tmp_path, reported.append):
        pass
    assert reported == [[]]


def test_a_process_caught_inside_its_exec_is_still_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after Popen returns, /proc/PID/cmdline can read empty (the kernel has not
    mapped the new program's arguments yet): such a process was taken for a stranger and
    left running, about one run in two when a slower test came before this file."""
    child = sleeper(tmp_path)
    real, reads = Path.read_bytes, []

    def early(self: Path) -> bytes:
        if self.name == "cmdline" and not reads:
            reads.append(self)
            return b""
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", early)
    reported: list[list[str]] = []
    with stopped_on_exit(tmp_path, reported.append):
        pass
    assert reads and reported == [["fake"]]
    assert child.popen.wait(timeout=30) == -signal.SIGTERM
