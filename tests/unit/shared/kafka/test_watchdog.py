"""A crashed worker exits even when Faust's stop hangs ("Wait for streams...")."""

from __future__ import annotations

import threading

import faust

from shared.kafka.watchdog import exit_after_crash


class FakeApp:
    def __init__(self) -> None:
        self.crashed: list[BaseException] = []

    def _crash(self, reason: BaseException) -> None:
        self.crashed.append(reason)


def test_a_crash_ends_the_process_after_the_grace_time_once() -> None:
    app, exited, done = FakeApp(), [], threading.Event()

    def exit_process(reason: BaseException) -> None:
        exited.append(reason)
        done.set()

    exit_after_crash(app, grace_s=0.01, exit_process=exit_process)
    exit_after_crash(app, grace_s=0.01, exit_process=exit_process)  # installed once
    boom = FileNotFoundError("in a timer")
    app._crash(boom)
    app._crash(boom)  # passed up again by its services: one exit
    assert done.wait(30)
    assert app.crashed == [boom, boom]  # Faust's own crash handling still runs
    assert exited == [boom]


def test_a_real_apps_crash_goes_through_the_watchdog() -> None:
    """The hook sits where mode passes every crash: a faust.App's `_crash`."""
    app, exited, done = faust.App("watchdog-test", autodiscover=False), [], threading.Event()
    exit_after_crash(app, grace_s=0.01, exit_process=lambda r: (exited.append(r), done.set()))
    app._crash(RuntimeError("stop"))
    assert done.wait(30) and app.crashed
