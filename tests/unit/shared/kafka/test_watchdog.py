"""A crashed worker exits even when Faust's stop hangs ("Wait for streams..."), and so does
one whose agent raised, committing nothing: the batch it held was never done (the
checkpoint's loops mark a batch done only when the agent moves on from it)."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path
from typing import Any
from unittest.mock import AsyncMock

import faust
import pytest
from faust.events import Event
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from shared.kafka import checkpoint, delivery
from shared.kafka.app import make_app
from shared.kafka.watchdog import exit_after_crash, exit_on_agent_error
from shared.settings import KafkaSettings
from shared.worker.boundary import exit_now


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


def test_a_crash_mid_batch_never_commits_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timer raised FileNotFoundError while redaction held a micro-batch
    (docs.normalized.v1/0@33..35, nothing sent yet); Faust's stop acked the batch (its
    `take_events` did, in a finally) and committed 36. Here with Faust's real stream and
    commit path, and the checkpoint's batches as redaction takes them now."""
    tp = TP("docs.normalized.v1", 0)
    exited: list[BaseException] = []
    # The process's one gate: sends earlier tests left on their own (closed) loops would
    # hold its settle() for ever.
    monkeypatch.setattr(checkpoint, "gate", checkpoint.DeliveryGate())

    async def go() -> tuple[list[bool], list[dict[TP, int]]]:
        delivery.install(on_refused=exit_now)  # what make_app does
        app = faust.App(f"crash-{id(exited)}", broker="kafka://127.0.0.1:1",
                        store="memory://", web_enabled=False, autodiscover=False)
        exit_after_crash(app, grace_s=0.01, exit_process=exited.append)
        consumer, commits = app.consumer, []

        async def commit(offsets: dict[TP, int]) -> bool:  # the broker's side of a commit
            commits.append(dict(offsets))
            return True
        monkeypatch.setattr(consumer, "_commit", commit)
        monkeypatch.setattr(consumer, "assignment", lambda: {tp})
        monkeypatch.setattr(app.producer, "flush", AsyncMock())
        monkeypatch.setattr(app.topics, "acks_enabled_for", lambda topic: topic == tp.topic)
        consumer._committed_offset[tp] = 33
        app.flow_control.resume()
        stream, batch, taken = app.channel().stream(), [], asyncio.Event()

        async def agent() -> None:  # a batch in hand: the analyzer loading, a model running
            async for groups in checkpoint.batches(stream, 10, 0.01):
                batch.extend(e for events in groups.values() for e in events)
                taken.set()
                await asyncio.Event().wait()
        task = asyncio.ensure_future(agent())
        for offset in (33, 34, 35):
            message = ConsumerMessage(tp.topic, tp.partition, offset, 0.0, 0, None, b"k",
                                      b"v", None, generation_id=app.consumer_generation_id)
            await stream.channel.put(Event(app, b"k", b"v", {}, message))
        await asyncio.wait_for(taken.wait(), 10)
        await app.crash(FileNotFoundError("stage-counters.tmp -> stage-counters.json"))
        # Faust's stop after the crash: the agents' stop throws StopAsyncIteration into each
        # actor's stream channel (Actor.cancel); the stream ends, and so does the reader
        # of checkpoint.batches, with the batch still in hand ...
        stream.channel._throw(StopAsyncIteration())
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gc.collect()  # the abandoned generators are closed: nothing in them may ack
        await asyncio.sleep(0.05)
        # ... then Consumer.on_stop commits (its wait_empty waits for nothing once crashed).
        await consumer.commit_and_end_transactions()
        return [e.message.acked for e in batch], commits
    acked, commits = asyncio.run(go())
    assert acked == [False, False, False]  # never done
    assert commits == []


def _run_an_agent_that_raises_mid_batch(monkeypatch: pytest.MonkeyPatch, guarded: bool,
                                        ) -> tuple[list[bool], list[dict[TP, int]],
                                                   list[BaseException]]:
    """A real agent takes docs.normalized.v1/0@33..35 with checkpoint.batches and raises
    outside any record boundary; then the commit timer's commit. The acks of the batch, the
    commits that reached the broker's side, the exits asked for."""
    tp = TP("docs.normalized.v1", 0)
    exited: list[BaseException] = []
    monkeypatch.setattr(checkpoint, "gate", checkpoint.DeliveryGate())

    async def go() -> tuple[list[bool], list[dict[TP, int]]]:
        delivery.install(on_refused=exit_now)  # what make_app does
        app = faust.App(f"agent-error-{id(exited)}", broker="kafka://127.0.0.1:1",
                        store="memory://", web_enabled=False, autodiscover=False)
        exit_after_crash(app, grace_s=30, exit_process=exited.append)
        if guarded:
            exit_on_agent_error(app, exit_process=exited.append)
        consumer, commits = app.consumer, []

        async def commit(offsets: dict[TP, int]) -> bool:  # the broker's side of a commit
            commits.append(dict(offsets))
            return True
        monkeypatch.setattr(consumer, "_commit", commit)
        monkeypatch.setattr(consumer, "assignment", lambda: {tp})
        monkeypatch.setattr(app.producer, "flush", AsyncMock())
        monkeypatch.setattr(app.topics, "acks_enabled_for", lambda topic: topic == tp.topic)
        consumer._committed_offset[tp] = 33
        app.flow_control.resume()
        channel, batch, raised, runs = app.channel(), [], asyncio.Event(), []

        @app.agent(channel)
        async def stage(stream: Any) -> None:
            runs.append(stream)
            async for groups in checkpoint.batches(stream, 10, 0.01):
                batch.extend(e for events in groups.values() for e in events)
                raised.set()
                raise KeyError("a bug between the records' boundaries")

        await stage.start()
        for offset in (33, 34, 35):
            message = ConsumerMessage(tp.topic, tp.partition, offset, 0.0, 0, None, b"k",
                                      b"v", None, generation_id=app.consumer_generation_id)
            await channel.put(Event(app, b"k", b"v", {}, message))
        # Bounds against a hang only: a loaded machine (the whole suite side by side) took
        # more than the 2 s these polls once had.
        await asyncio.wait_for(raised.wait(), 60)
        # Faust's supervisor replaces the crashed actor; a stop before the new one has
        # started would never cancel it, and the agent's stop would wait for it for ever.
        for _ in range(6000):
            if len(runs) > 1 and all(a.started for a in stage.supervisor._services):
                break
            await asyncio.sleep(0.01)
        gc.collect()  # the abandoned generators are closed: nothing in them may ack
        await asyncio.sleep(0.05)
        await consumer.commit_and_end_transactions()  # the commit timer's next round
        await stage.stop()
        return [e.message.acked for e in batch], commits
    acked, commits = asyncio.run(go())
    return acked, commits, exited


def test_an_agent_that_raises_mid_batch_exits_and_never_commits_the_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    acked, commits, exited = _run_an_agent_that_raises_mid_batch(monkeypatch, guarded=True)
    assert acked == [False, False, False]
    assert commits == []
    assert [type(e) for e in exited] == [KeyError]


def test_without_the_guard_the_batch_is_still_not_committed_but_nothing_replays_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint alone keeps the batch from a commit (Faust's take_events acked it and
    Faust committed 36); the guard is what makes the worker exit, so the batch replays
    instead of holding its partition's commit while Faust's new actor goes on past it."""
    acked, commits, exited = _run_an_agent_that_raises_mid_batch(monkeypatch, guarded=False)
    assert acked == [False, False, False]
    assert commits == []
    assert exited == []


def test_every_agent_of_a_made_app_is_guarded(tmp_path: Path) -> None:
    """make_app arms the guard before any agent is declared; each agent takes it as its
    on_error (Faust's own handler would commit)."""
    app = make_app("test-guarded-app", KafkaSettings(), tmp_path)

    @app.agent(app.channel())
    async def stage(stream: Any) -> None:
        async for _ in stream:
            pass

    assert stage._on_error is app._on_agent_error
    assert stage._on_error.__qualname__ == "exit_on_agent_error.<locals>.on_agent_error"
