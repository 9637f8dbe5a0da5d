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
and its services crashed, `shared.kafka.checkpoint.halt_commits` stops its checkpoint at
step 4. The checkpoint alone would commit only records done, with their outputs on the
broker; the halt keeps a worker whose state is unknown from committing even those (with
Faust's `take_events`, which acked the batch in hand on the way out, five documents of
redaction were lost after a FileNotFoundError in a timer; nothing uses it any more).

It wraps mode-streaming's private `Service._crash` on the one app instance (not the class,
so no other service of the process is touched). Upstream: faust-streaming/faust#324 (a
worker stays in "Stopping" forever; closed as wontfix) and robinhood/faust#301
(CrashingSupervisor does not end the process). Removable when a crashed Faust worker's
stop is bounded in time, i.e. "Wait for streams" gives up on records that will never be
acked (tests/unit/shared/kafka/test_watchdog.py keeps the expected behaviour).

An exception that escapes an agent's function never reaches `_crash`: Faust's
`Agent._execute_actor` awaits the app's `_on_agent_error` (which commits:
`Consumer.on_task_error`), marks the actor crashed and its supervisor starts a new one.
The record or batch in hand is not done (the checkpoint's loops mark a record done only
when the loop moves on), so the commit stops before it; but the new actor would go on
past it, its partition's commit held there for good. `exit_on_agent_error` replaces
`_on_agent_error` on the app instance (each `@app.agent` takes it as the agent's
`on_error` when it is declared, so before any agent): it halts the app's commits and
ends the process with EXIT_FATAL at once, and the input replays on restart. This is how
redaction and the ledger's query batches stop when a batch cannot finish (the broker,
the node, a partition another worker has audited past): they raise out of the agent. The
per-record boundary (shared/worker/boundary.py) ends the process for a fatal failure
inside it. Upstream: restarting the agent is Faust's intended default
(`App._on_agent_error` points to "agent-errors" in its agents guide), so no issue was
filed (tests/unit/shared/kafka/test_watchdog.py shows it).
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from shared.kafka import checkpoint
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
        checkpoint.halt_commits(app, reason)
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
        checkpoint.halt_commits(app, exc)
        log.critical("agent %s raised %s at %s; exiting without a commit so its input "
                     "replays", getattr(agent, "name", agent), type(exc).__name__,
                     _where(exc))
        exit_process(exc)

    app._on_agent_error = on_agent_error


def _where(exc: BaseException) -> str:
    """The innermost frame, for the log: the exception's message may quote a record."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
