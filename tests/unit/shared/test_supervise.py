"""The supervisor on real child processes with a hand-driven clock: restarts, backoff, reasons."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.procs import Child, spawn, stop
from services.cli.supervise import Backoff, Supervisor, describe_exit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
FAILER = [sys.executable, "-c", "raise SystemExit(3)"]


@pytest.fixture
def supervisor() -> Iterator[tuple[Supervisor, Clock]]:
    clock = Clock()
    sup = Supervisor(Backoff(initial_s=1, factor=2, max_s=8, reset_after_s=60), clock)
    try:
        yield sup, clock
    finally:
        sup.stop()
        stop(sup.children(), 5)


def supervise(sup: Supervisor, name: str, argv: list[str], run_dir: Path) -> list[Child]:
    """Supervise `argv` as `name`; the returned list collects every process it started."""
    started: list[Child] = []

    def start() -> Child:
        started.append(spawn(name, argv, run_dir))
        return started[-1]

    sup.add(start(), start)
    return started


def kill9(child: Child) -> None:
    os.kill(child.popen.pid, signal.SIGKILL)
    child.popen.wait()


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = Backoff(initial_s=0.5, factor=2, max_s=5)
    assert [backoff.delay(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 5, 5]


def test_exit_reasons_name_the_signal_or_the_code() -> None:
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(0) == "exit code 0"


def test_a_killed_process_is_restarted_after_its_backoff_and_the_rest_keep_running(
        supervisor: tuple[Supervisor, Clock], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    sup, clock = supervisor
    worker = supervise(sup, "worker", SLEEPER, tmp_path)
    other = supervise(sup, "other", SLEEPER, tmp_path)
    kill9(worker[0])
    with caplog.at_level(logging.INFO, "streamrag.supervise"):
        sup.poll()
        assert len(worker) == 1  # the backoff (1 s) has not passed
        clock.now += 0.9
        sup.poll()
        assert len(worker) == 1
        clock.now += 0.1
        sup.poll()
    assert len(worker) == 2 and worker[1].alive()
    assert worker[1].popen.pid != worker[0].popen.pid
    assert len(other) == 1 and other[0].alive()  # untouched
    assert sup.children() == [worker[1], other[0]]
    assert sup.entries["worker"].restarts == 1 and sup.entries["other"].restarts == 0
    assert f"worker (pid {worker[0].popen.pid}) exited: killed by SIGKILL" in caplog.text
    assert f"worker restarted, pid {worker[1].popen.pid}" in caplog.text
    assert (tmp_path / "pids" / "worker.pid").read_text() == str(worker[1].popen.pid)
    log = (tmp_path / "logs" / "worker.log").read_text()
    assert "--- streamrag: worker killed by SIGKILL; restarting ---" in log


def test_failures_in_a_row_back_off_and_a_long_run_starts_the_count_over(
        supervisor: tuple[Supervisor, Clock], tmp_path: Path) -> None:
    sup, clock = supervisor
    worker = supervise(sup, "worker", SLEEPER, tmp_path)
    waits = []
    for _ in range(5):
        kill9(worker[-1])
        sup.poll()
        entry = sup.entries["worker"]
        assert entry.restart_at is not None
        waits.append(entry.restart_at - clock.now)
        clock.now = entry.restart_at
        sup.poll()
    assert waits == [1, 2, 4, 8, 8]  # doubling, capped at max_s
    clock.now += 60  # up a whole reset_after_s: healthy again
    kill9(worker[-1])
    sup.poll()
    entry = sup.entries["worker"]
    assert entry.failures == 1 and entry.restart_at == clock.now + 1
    assert len(worker) == 6 and entry.restarts == 5


def test_a_process_that_keeps_exiting_is_reported_as_crash_looping(
        supervisor: tuple[Supervisor, Clock], tmp_path: Path) -> None:
    sup, clock = supervisor
    failer = supervise(sup, "failer", FAILER, tmp_path)
    supervise(sup, "fine", SLEEPER, tmp_path)
    seen = []
    for _ in range(3):
        failer[-1].popen.wait()
        sup.poll()
        seen.append(sup.entries["failer"].last_exit)
        clock.now += 10
        sup.poll()
    assert seen == ["exit code 3"] * 3
    assert sup.crash_looping() == ["failer"]


def test_a_start_that_raises_is_one_more_failure_and_is_retried(
        supervisor: tuple[Supervisor, Clock], tmp_path: Path) -> None:
    sup, clock = supervisor
    first = spawn("flaky", SLEEPER, tmp_path)
    attempts: list[int] = []

    def start() -> Child:
        attempts.append(1)
        if len(attempts) == 1:
            raise TimeoutError("nothing listens")
        return spawn("flaky", SLEEPER, tmp_path)

    sup.add(first, start)
    kill9(first)
    sup.poll()
    clock.now += 1
    sup.poll()  # the first restart fails: the next try waits the second delay (2 s)
    entry = sup.entries["flaky"]
    assert len(attempts) == 1 and entry.failures == 2 and entry.restart_at == clock.now + 2
    clock.now += 2
    sup.poll()
    assert len(attempts) == 2 and entry.child.alive() and entry.restart_at is None


def test_the_thread_restarts_on_its_own_until_stopped(tmp_path: Path) -> None:
    sup = Supervisor(Backoff(initial_s=0.01), interval_s=0.01)
    worker = supervise(sup, "worker", SLEEPER, tmp_path)
    sup.start()
    try:
        kill9(worker[0])
        for _ in range(500):  # polls, not a time bound: at most 5 s of 10 ms waits
            if len(worker) == 2:
                break
            threading.Event().wait(0.01)
        assert len(worker) == 2 and worker[1].alive()
        sup.stop()
        kill9(worker[1])
        threading.Event().wait(0.1)  # ten of its intervals: stopped, nothing restarts it
        assert len(worker) == 2
    finally:
        sup.stop()
        stop(sup.children(), 5)


def test_what_a_killed_wrapper_left_running_is_killed_before_the_restart(
        supervisor: tuple[Supervisor, Clock], tmp_path: Path) -> None:
    """Like anvil's node launcher: kill -9 of the wrapper leaves its child running."""
    grandchild = tmp_path / "grandchild.pid"
    wrapper = [sys.executable, "-c", "import subprocess, sys, time; p = subprocess.Popen("
               f"[sys.executable, '-c', 'import time; time.sleep(600)']); "
               f"open({str(grandchild)!r}, 'w').write(str(p.pid)); time.sleep(600)"]
    sup, clock = supervisor
    started = supervise(sup, "wrapper", wrapper, tmp_path)
    for _ in range(500):
        if grandchild.exists() and grandchild.read_text():
            break
        threading.Event().wait(0.01)
    orphan = int(grandchild.read_text())
    try:
        kill9(started[0])
        assert Path(f"/proc/{orphan}").exists()  # left behind by the -9
        sup.poll()
        for _ in range(500):  # it is not our child: it is gone once init reaps it
            if not Path(f"/proc/{orphan}").exists():
                break
            threading.Event().wait(0.01)
        assert not Path(f"/proc/{orphan}").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)
