"""A worker that has stopped working while its process lives exits, so supervision restarts it.

Faust's answer to a fatal error in a timer, a task, a rebalance callback or an agent that
calls `app.crash()` is a clean stop, and that stop waits for every record handed to a
stream to be acked ("Wait for streams..."); embedding holds its records unacked while they
wait for a batch, and they never will be: the process lived on, consumed nothing more, and
supervision (which restarts a process when it exits) never stepped in. Seen after a failed
produce of an oversized embedded chunk set and after a FileNotFoundError in a timer.

`exit_after_crash(app, grace_s)` lets the clean stop try for `grace_s` and then ends the
process with EXIT_FATAL from a thread, which works even when the event loop is stuck. The
uncommitted input replays on restart, as after kill -9, which every stage survives.

The crashed worker commits nothing more: the moment the app crashes, before mode marks it
and its services crashed, `shared.kafka.delivery.halt_commits` closes its commit barrier. Faust's
stop after a crash acks the micro-batches its agents still hold (`Stream.on_stop` closes
each `take_events` generator, whose `finally` acks the batch in hand) and then commits
(`Consumer.on_stop`); those batches may never have produced anything (five
documents of redaction lost that way after a FileNotFoundError in a timer).

It wraps mode-streaming's private `Service._crash` on the one app instance (not the class,
so no other service of the process is touched). Upstream: faust-streaming/faust#324 (a
worker stays in "Stopping" forever; closed as wontfix) and robinhood/faust#301
(CrashingSupervisor does not end the process). Removable when a crashed Faust worker's
stop is bounded in time, i.e. "Wait for streams" gives up on records that will never be
acked (tests/unit/shared/kafka/test_watchdog.py keeps the expected behaviour).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from shared.kafka import delivery
from shared.worker.boundary import exit_now

log = logging.getLogger(__name__)
CRASH_GRACE_S = 5.0


def exit_after_crash(app: Any, grace_s: float = CRASH_GRACE_S,
                     exit_process: Callable[[BaseException], None] = exit_now) -> None:
    """Make a crash of `app` (its own, or one its services pass up) end the process."""
    if getattr(app, "_streamrag_watchdog", False):
        return
    app._streamrag_watchdog = True
    crash = app._crash  # mode.Service._crash: every path to a crashed app goes through it
    fired = threading.Event()

    def _crash(reason: BaseException) -> None:
        # First: nothing the stop acks from here on may be committed (shared.kafka.delivery).
        delivery.halt_commits(app, reason)
        crash(reason)
        if fired.is_set():
            return
        fired.set()
        log.critical("the worker crashed (%s); exiting in %.0f s if its stop has not by then",
                     type(reason).__name__, grace_s)

        def later() -> None:
            log.critical("the worker is still alive %.0f s after it crashed: exiting", grace_s)
            exit_process(reason)

        timer = threading.Timer(grace_s, later)
        timer.daemon = True
        timer.start()

    app._crash = _crash
