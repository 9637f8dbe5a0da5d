"""Freeze the embedded mesh for a moment: every process named in the run directory's pid
files stopped with SIGSTOP (the workers, then anvil, then the broker) and continued with
SIGCONT, however the block ends.

What the disk holds while the mesh is frozen is what it holds after `kill -9` of every
process at one instant, which the mesh is built to recover from (docs/durability.md):
`streamrag backup` copies it then (services/cli/backup.py). The mesh is thawed in a
`finally`, with SIGINT, SIGTERM and SIGHUP turned into an exception while it is frozen, and
by a guard process that continues every stopped process when the caller dies without doing
so (kill -9) or when the pause outlasts its limit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from services.cli.procs import _is_ours
from shared.errors import InfrastructureError

LAST = ("anvil", "broker")  # frozen after the workers, in this order; thawed first
STOP_TIMEOUT_S = 10.0  # a thread in uninterruptible I/O stops once the I/O is done


@dataclass(frozen=True)
class Proc:
    name: str
    pid: int  # leader of its own process group (procs.spawn starts a new session)


def mesh_processes(run_dir: Path, ours: Callable[[int], bool] = _is_ours) -> list[Proc]:
    """The live processes `streamrag up` recorded in run_dir/pids, in freezing order: the
    workers, then anvil, then the broker. A pid file of a process that is gone, or whose pid
    now names someone else's process, is passed over."""
    found = []
    for pid_file in sorted((run_dir / "pids").glob("*.pid")):
        with contextlib.suppress(OSError):
            text = pid_file.read_text().strip()
            if text.isdigit() and ours(int(text)):
                found.append(Proc(pid_file.stem, int(text)))
    return sorted(found, key=lambda p: LAST.index(p.name) + 1 if p.name in LAST else 0)


def group_stopped(pgid: int) -> bool:
    """Every thread of every process of the group is stopped (or gone): SIGSTOP is taken
    when a thread leaves the kernel, so a write under way finishes first."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            states = [t.read_text().rsplit(")", 1)[1].split()[0]
                      for t in stat.parent.glob("task/*/stat")]
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if any(s not in ("T", "t", "Z", "X") for s in states):
            return False
    return True


# Runs beside `streamrag backup` with the groups it is told to stop on its stdin; unless it
# reads "done" within the pause allowed, it continues them all: its parent died, or hangs.
GUARD = """
import os, select, signal, sys, time
deadline, groups, buf = time.monotonic() + float(sys.argv[1]), [], b""
while True:
    ready, _, _ = select.select([0], [], [], max(0.0, deadline - time.monotonic()))
    chunk = os.read(0, 4096) if ready else b""
    buf += chunk
    if b"done\\n" in buf:
        sys.exit(0)
    *lines, buf = buf.split(b"\\n")
    groups += [int(x) for x in lines if x.isdigit()]
    if not chunk:
        break
for group in groups:
    try:
        os.killpg(group, signal.SIGCONT)
    except OSError:
        pass
sys.exit(1)
"""


class Guard:
    """The guard process: told of each group before it is stopped."""

    def __init__(self, max_pause_s: float) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-c", GUARD, str(max_pause_s)],
            stdin=subprocess.PIPE, start_new_session=True)

    def watch(self, pgid: int) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(f"{pgid}\n".encode())
        self.popen.stdin.flush()

    def tripped(self) -> bool:
        """It has thawed the mesh by itself (the pause ran over)."""
        return self.popen.poll() is not None

    def release(self) -> None:
        assert self.popen.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it tripped and exited
            self.popen.stdin.write(b"done\n")
        with contextlib.suppress(BrokenPipeError):
            self.popen.stdin.close()
        self.popen.wait()


@dataclass
class Freezer:
    """Stops and continues the mesh's process groups; the signal and the check for a stopped
    group are parameters so the logic is tested with fakes."""

    processes: list[Proc]
    signal_group: Callable[[int, int], None] = os.killpg
    stopped: Callable[[int], bool] = group_stopped
    watch: Callable[[int], None] = lambda pgid: None
    frozen: list[Proc] = field(default_factory=list)

    def freeze(self) -> None:
        for proc in self.processes:
            self.watch(proc.pid)
            try:
                self.signal_group(proc.pid, signal.SIGSTOP)
            except ProcessLookupError:  # exited since it was listed
                continue
            self.frozen.append(proc)
        for proc in self.frozen:
            self._wait_stopped(proc)

    def _wait_stopped(self, proc: Proc) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while not self.stopped(proc.pid):
            if time.monotonic() > deadline:
                msg = f"{proc.name} (pid {proc.pid}) did not stop within {STOP_TIMEOUT_S:.0f}s"
                raise InfrastructureError(msg)
            time.sleep(0.005)

    def thaw(self) -> None:
        """Continue every group stopped, the broker first; never raises."""
        for proc in reversed(self.frozen):
            with contextlib.suppress(OSError):
                self.signal_group(proc.pid, signal.SIGCONT)
        self.frozen.clear()

    def blink(self, name: str, for_s: float) -> None:
        """Let one process run for `for_s` (to finish a write it was stopped in)."""
        for proc in self.frozen:
            if proc.name == name:
                with contextlib.suppress(OSError):
                    self.signal_group(proc.pid, signal.SIGCONT)
                time.sleep(for_s)
                with contextlib.suppress(OSError):
                    self.signal_group(proc.pid, signal.SIGSTOP)
                self._wait_stopped(proc)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def frozen(freezer: Freezer) -> Iterator[Freezer]:
    """The mesh stopped for the block's length, continued however the block ends."""
    stops = (signal.SIGTERM, signal.SIGHUP)
    main = threading.current_thread() is threading.main_thread()  # where handlers can be set
    previous = {s: signal.signal(s, _interrupt) for s in stops} if main else {}
    try:
        freezer.freeze()
        yield freezer
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *stops})  # thaw in one go
        try:
            freezer.thaw()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, *stops})
