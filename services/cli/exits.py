"""Leave no mesh process behind when a benchmark ends, however it ends.

The mesh's processes run in their own sessions (a terminal's Ctrl-C reaches only the
parent), so they outlive a parent that dies without unwinding: SIGTERM and SIGHUP kill a
Python process outright, and a Ctrl-C that lands while a process is being spawned (before
the supervisor knows it) or while the mesh is being stopped (a second Ctrl-C) skips the
rest of the stop. `stopped_on_exit` turns SIGTERM and SIGHUP into KeyboardInterrupt so
every exit unwinds, and afterwards stops whatever still has a pid file under the run
directory (spawn writes it first), ignoring further Ctrl-C until that is done.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from services.cli.procs import stop_stale

UNWOUND = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def stopped_on_exit(run_dir: Path, report: Callable[[list[str]], None] = lambda _: None,
                    ) -> Iterator[None]:
    """Inside: SIGTERM/SIGHUP raise KeyboardInterrupt. On the way out (normal return,
    exception or signal): every process with a pid file under run_dir is stopped
    (SIGTERM, then SIGKILL) and `report` gets their names (empty when the mesh's own stop
    already ended them)."""
    previous = {s: signal.signal(s, _interrupt) for s in UNWOUND}
    try:
        yield
    finally:
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            report(stop_stale(run_dir))
        finally:
            signal.signal(signal.SIGINT, interrupt)
            for s, handler in previous.items():
                signal.signal(s, handler)
