"""A worker that has stopped working while its process lives exits, so supervision restarts it.

Two ways out, both armed by `shared.kafka.app.make_app` on every app: a crash of the app
(`exit_after_crash`, below) and an exception that escapes an agent (`exit_on_agent_error`).

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

An exception that escapes an agent's function never reaches `_crash`: Faust's
`Agent._execute_actor` awaits the app's `_on_agent_error` (which commits:
`Consumer.on_task_error`), marks the actor crashed and its supervisor starts a new one,
while the abandoned stream iterator's `finally` acks the event or `take_events` batch in
hand. Records not processed, or whose outputs never reached the broker, would be
committed. `exit_on_agent_error` replaces `_on_agent_error` on the app instance (each
`@app.agent` takes it as the agent's `on_error` when it is declared, so before any agent):
it halts the app's commits and ends the process with EXIT_FATAL at once, and the input
replays on restart. The per-record boundary (shared/worker/boundary.py) already ends the
process for a fatal failure inside it; this catches whatever raises outside one (a
cancellation is not an error to Faust: redaction and the ledger's query batches exit on
their own when one reaches a batch in hand). Upstream: committing on an agent error is
Faust's intended default (`App._on_agent_error` points to "agent-errors" in its agents
guide), so no issue was filed; removable only if Faust's restart of an agent stopped acking
and committing what the agent held (tests/unit/shared/kafka/test_watchdog.py shows it).
"""

from __future__ import annotations

import logging
import threading
import traceback
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


def exit_on_agent_error(app: Any,
                        exit_process: Callable[[BaseException], None] = exit_now) -> None:
    """Make an exception that escapes any agent of `app` halt its commits and end the
    process; call before the app's agents are declared."""
    if getattr(app, "_streamrag_agent_guard", False):
        return
    app._streamrag_agent_guard = True

    async def on_agent_error(agent: Any, exc: BaseException) -> None:
        # Before any await: the acks of the abandoned batch must never reach a commit.
        delivery.halt_commits(app, exc)
        log.critical("agent %s raised %s at %s; exiting without a commit so its input "
                     "replays", getattr(agent, "name", agent), type(exc).__name__,
                     _where(exc))
        exit_process(exc)

    app._on_agent_error = on_agent_error


def _where(exc: BaseException) -> str:
    """The innermost frame, for the log: the exception's message may quote a record."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
