"""Keep the mesh's processes running: restart one that exits, with capped exponential backoff.

`streamrag up` and the integration tests' isolated meshes both run this, in a thread beside
whatever else they do; only stopping the mesh (Ctrl-C, SIGTERM) stops it. A process that
exits is restarted after `Backoff.delay(n)` seconds, n counting its failures in a row; one
that stayed up `reset_after_s` before failing counts as healthy again, so a crash once a day
restarts at once while a crash loop backs off to `max_s` and does not eat the CPU.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from services.cli.procs import Child, kill_group

log = logging.getLogger("streamrag.supervise")


@dataclass(frozen=True)
class Backoff:
    initial_s: float = 1.0
    factor: float = 2.0
    max_s: float = 30.0
    reset_after_s: float = 60.0  # up this long before exiting: the failure count starts over

    def delay(self, failures: int) -> float:
        """Seconds to wait before restart number `failures` of a run of failures (1-based)."""
        return min(self.max_s, self.initial_s * self.factor ** max(failures - 1, 0))


def describe_exit(returncode: int) -> str:
    """'exit code 3' or 'killed by SIGKILL': Popen reports a signal as a negative code."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


@dataclass
class Supervised:
    """One process under supervision and its restart bookkeeping."""

    name: str
    start: Callable[[], Child]  # spawns it (again) and returns the new child
    child: Child
    started_at: float
    failures: int = 0  # exits in a row, each within reset_after_s of its start
    restarts: int = 0  # restarts since supervision began (status, tests)
    restart_at: float | None = None  # when a restart is due; None while it runs
    last_exit: str = ""


@dataclass
class Supervisor:
    backoff: Backoff = field(default_factory=Backoff)
    clock: Callable[[], float] = time.monotonic
    interval_s: float = 0.2  # how often the thread looks at its processes
    entries: dict[str, Supervised] = field(default_factory=dict)
    # Re-entrant: a start function (the embedded broker's) may look at the other processes.
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def add(self, child: Child, start: Callable[[], Child]) -> None:
        with self._lock:
            self.entries[child.name] = Supervised(child.name, start, child, self.clock())

    def children(self) -> list[Child]:
        """The current process of each supervised name, in the order they were added."""
        with self._lock:
            return [e.child for e in self.entries.values()]

    def crash_looping(self, failures: int = 3) -> list[str]:
        """Names that failed `failures` times in a row: a start that will not succeed."""
        with self._lock:
            return [e.name for e in self.entries.values() if e.failures >= failures]

    def poll(self) -> None:
        """Notice exits and schedule their restart; restart those whose backoff is over."""
        with self._lock:
            for entry in self.entries.values():
                self._check(entry, self.clock())

    def _check(self, entry: Supervised, now: float) -> None:
        if entry.restart_at is None:
            if entry.child.alive():
                return
            code = entry.child.popen.returncode
            kill_group(entry.child)  # leftovers would hold its port or its files
            up_s = now - entry.started_at
            entry.failures = 1 if up_s >= self.backoff.reset_after_s else entry.failures + 1
            delay = self.backoff.delay(entry.failures)
            entry.restart_at, entry.last_exit = now + delay, describe_exit(code)
            log.error("%s (pid %d) exited: %s after %.1fs up; restarting in %.1fs "
                      "(failure %d in a row; log %s)", entry.name, entry.child.popen.pid,
                      entry.last_exit, up_s, delay, entry.failures, entry.child.log_path)
        if now >= entry.restart_at:
            self._restart(entry, now)

    def _restart(self, entry: Supervised, now: float) -> None:
        try:
            with open(entry.child.log_path, "a") as out:  # in its own log: why it restarted
                out.write(f"\n--- streamrag: {entry.name} {entry.last_exit}; restarting ---\n")
            entry.child = entry.start()
        except Exception as exc:  # a failed start is one more failure, retried later
            entry.failures += 1
            entry.restart_at = now + self.backoff.delay(entry.failures)
            log.error("%s could not be restarted (%s); next try in %.1fs", entry.name,
                      type(exc).__name__, entry.restart_at - now)
            return
        entry.started_at, entry.restart_at = self.clock(), None
        entry.restarts += 1
        log.warning("%s restarted, pid %d (restart %d)", entry.name, entry.child.popen.pid,
                    entry.restarts)

    def start(self) -> None:
        """Supervise in a daemon thread until stop()."""
        with self._lock:
            self._stop.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="supervisor",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        # The thread never ends before the process: a child it restarted dies with the
        # thread that spawned it (PR_SET_PDEATHSIG, services/cli/procs.py), and must outlive
        # stop() until the mesh stops it in order.
        while True:
            time.sleep(self.interval_s)
            if self._stop.is_set():
                continue
            try:
                self.poll()
            except Exception:  # the supervisor itself must outlive any one bad poll
                log.exception("supervisor poll failed; trying again")

    def stop(self) -> None:
        """Stop restarting (before the mesh's processes are stopped on purpose); returns
        once no restart is under way."""
        self._stop.set()
        with self._lock:  # a poll in progress holds it
            pass
