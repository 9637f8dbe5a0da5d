"""No caller waits without end on a generation: auto's generation ends within the time it
was chosen by (a quoted answer replaces it, or what was streamed stands, cut short), a
call with no deadline gets the server's default, and generation asked for by name is
refused at once when the work queued ahead would keep it past the call's deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import pytest

from services.inference.answer.modes import GeneratorLoad
from services.inference.answer.result import Answer
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch, hit
from tests.unit.inference.serving import serving, stub

CHUNKS = {0: [hit("c-ttl", 0.9, "Tamarin keeps cached pages for 35 days before eviction.",
                  doc_id="tamarin")]}
QUESTION = "how long does Tamarin keep cached pages?"


class HangingGenerator:
    """Writes `first` and then never finishes, as a generation behind a long queue or on a
    slow machine does; its estimate says it fits. `closed` counts streams ended (the row
    freed)."""

    def __init__(self, first: Sequence[str] = (), estimate_s: float = 0.1,
                 waiting: int = 0) -> None:
        self.first, self.estimate_s, self.waiting = tuple(first), estimate_s, waiting
        self.lm, self.closed = None, 0

    rechecks = 0  # times auto quoted on the estimate and asked for it to be measured

    def recheck(self) -> None:
        self.rechecks += 1

    def load(self, params: Any) -> GeneratorLoad:
        return GeneratorLoad(overloaded=False, estimate_s=self.estimate_s, waiting=self.waiting)

    async def stream(self, params: Any, texts: Sequence[str]) -> AsyncIterator[str | Answer]:
        try:
            for piece in self.first:
                yield piece
            await asyncio.Event().wait()
            yield Answer((), "stop", 0, 0, 0.0)  # never reached
        finally:
            self.closed += 1

    async def stop(self) -> None:
        pass


async def _with(generator: HangingGenerator, call: str, request: pb.QueryRequest,
                **settings: Any) -> tuple[Any, float]:
    async with serving(FakeSearch(CHUNKS), **settings) as (runtime, channel):
        runtime.engine.generative = generator
        started = time.perf_counter()
        if call == "Query":
            reply: Any = await stub(channel).Query(request)
        else:
            reply = [r async for r in stub(channel).StreamQuery(request)]
        return reply, time.perf_counter() - started


def run(generator: HangingGenerator, call: str = "Query", **kw: Any) -> tuple[Any, float]:
    request = pb.QueryRequest(question=QUESTION, deadline_ms=kw.pop("deadline_ms", 0),
                              answer_mode=kw.pop("answer_mode", ""))
    return asyncio.run(_with(generator, call, request, **kw))


def test_auto_with_no_deadline_serves_the_quoted_answer_when_its_generation_runs_late() -> None:
    generator = HangingGenerator(["Tamarin keeps"])
    reply, _ = run(generator, auto_deadline_ms=1500)
    assert reply.answer_mode == "extractive" and "35 days" in reply.answer
    assert reply.answer_mode_reason == (
        "deadline: the generation outlasted the 1.5s auto judged it by, extractive served")
    assert generator.closed == 1  # the generation was stopped (it never ends), its row freed


def test_a_late_generation_auto_streamed_ends_cut_short_and_says_so() -> None:
    generator = HangingGenerator(["Tamarin keeps", " cached pages"])
    events, _ = run(generator, "StreamQuery", auto_deadline_ms=1500)
    start, deltas, end = events[0].start, [e.delta for e in events[1:-1]], events[-1].end
    assert (start.answer_mode, start.answer_mode_reason) == ("generative", "fits")
    assert deltas == ["Tamarin keeps", " cached pages"]  # what the reader had stands
    assert end.finish_reason == "deadline" and end.answer_mode == "generative"
    assert end.answer_mode_reason.endswith("judged it by, cut short")
    assert generator.closed == 1


def test_a_streamed_generation_late_before_its_first_token_is_quoted_instead() -> None:
    generator = HangingGenerator()
    events, _ = run(generator, "StreamQuery", auto_deadline_ms=1500)
    end = events[-1].end
    assert "35 days" in "".join(e.delta for e in events[1:-1])
    assert (end.answer_mode, end.finish_reason) == ("extractive", "stop")
    assert end.answer_mode_reason.endswith("extractive served")


class Quick(HangingGenerator):
    """Writes a grounded answer at once."""

    async def stream(self, params: Any, texts: Sequence[str]) -> AsyncIterator[str | Answer]:
        text = "Tamarin keeps cached pages for 35 days before eviction [1]."
        yield text
        yield Answer((text,), "stop", 9, 4, 1.0, mode="generative", unit="tokens", shown=(1,))


def test_a_generation_on_time_is_not_touched_by_the_budget() -> None:
    reply, _ = run(Quick(), auto_deadline_ms=1500)
    assert (reply.answer_mode, reply.answer_mode_reason) == ("generative", "fits")


def test_a_call_with_no_deadline_gets_the_servers_default() -> None:
    generator = HangingGenerator()  # asked for by name: no auto budget, only the deadline
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        run(generator, answer_mode="generative", default_deadline_ms=1200)
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "default deadline of 1200 ms passed" in (failed.value.details() or "")
    assert generator.closed == 1


def test_the_callers_own_deadline_wins_over_the_default() -> None:
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        run(HangingGenerator(), answer_mode="generative", deadline_ms=800,
            default_deadline_ms=600_000)
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "deadline_ms 800 passed" in (failed.value.details() or "")


def test_generation_by_name_behind_a_queue_it_cannot_clear_in_time_is_refused_at_once() -> None:
    generator = HangingGenerator(estimate_s=40.0, waiting=5)
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        run(generator, answer_mode="generative", deadline_ms=10_000)
    assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "5 generations queued" in (failed.value.details() or "")
    assert generator.closed == 0  # never queued


def test_an_answer_shaped_by_a_late_generation_is_not_kept_for_the_next_caller() -> None:
    async def go() -> tuple[Any, Any]:
        async with serving(FakeSearch(CHUNKS), auto_deadline_ms=1500) as (runtime, channel):
            runtime.engine.generative = HangingGenerator()
            late = await stub(channel).Query(pb.QueryRequest(question=QUESTION))
            runtime.engine.generative = Quick()
            return late, await stub(channel).Query(pb.QueryRequest(question=QUESTION))
    late, next_one = asyncio.run(go())
    assert late.answer_mode_reason.startswith("deadline: ")
    assert (next_one.answer_mode, next_one.answer_mode_reason) == ("generative", "fits")
