"""Routed calls seen by the guard from their start: a call in flight past the objective is
sampled in every window it stays in flight, one its caller gives up on is its variant's
error, and no call counts twice in one window."""

from __future__ import annotations

import asyncio
import json
import math
from collections import defaultdict

import grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference.guard.inflight import InFlight
from services.inference.guard.samples import GuardSample
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.polling import eventually_async
from tests.unit.inference.fakes import FakeSearch
from tests.unit.inference.serving import CHUNKS, serving, stub

OBJECTIVE_MS, WINDOW_S = 1200.0, 5.0


def record(version: int, variants: dict[str, object]) -> bytes:
    """A config.query.v1 record of `version` with these variants."""
    return json.dumps({"version": version, "author": "t", "at": 0.0, "knobs": {},
                       "variants": variants}).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def window(at: float) -> float:
    return math.floor(at / WINDOW_S) * WINDOW_S


calls = st.lists(st.tuples(st.floats(0, 30), st.floats(0, 20),
                           st.sampled_from(["call", "error", "cancelled", None])),
                 min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(calls=calls)
def test_each_call_counts_once_per_window_it_is_slow_in_and_ends_counted(
        calls: list[tuple[float, float, str | None]]) -> None:
    clock = Clock()
    watched = InFlight(OBJECTIVE_MS, WINDOW_S, clock)
    # Begins, ends and the sender's one-second drains, in time order.
    events = sorted([(s, 0, i) for i, (s, _, _) in enumerate(calls)]
                    + [(s + d, 1, i) for i, (s, d, _) in enumerate(calls)]
                    + [(float(t), 2, -1) for t in range(0, 52)])
    watches, samples, slow_at = {}, [], defaultdict(set)
    for at, what, i in events:
        clock.now = at
        if what == 0:
            watches[i] = watched.begin(f"v{i}", 3)
        elif what == 1:
            watches[i].end(calls[i][2])  # type: ignore[arg-type]
        else:
            for j, w in watches.items():
                if not w.ended and (at - calls[j][0]) * 1000 > OBJECTIVE_MS:
                    slow_at[j].add(window(at))
            samples += watched.drain()
    by_call: dict[int, list[GuardSample]] = defaultdict(list)
    for s in samples:
        by_call[int(s.variant[1:])].append(s)
        assert s.config_version == 3
        assert s.slow == (s.latency_ms > OBJECTIVE_MS)
        assert s.kind != "overdue" or s.slow
    for i, (start, duration, kind) in enumerate(calls):
        mine = by_call[i]
        windows = [window(s.at) for s in mine]
        assert len(windows) == len(set(windows))  # never twice in one window
        overdue = {window(s.at) for s in mine if s.kind == "overdue"}
        assert overdue == slow_at[i]  # every window a drain saw it in flight past the objective
        ended = [s for s in mine if s.kind != "overdue"]
        if kind is None or window(start + duration) in overdue:
            assert ended == []
        else:
            [end] = ended
            assert (end.kind, end.at) == (kind, start + duration)
            assert math.isclose(end.latency_ms, duration * 1000, abs_tol=1e-6)
    assert len(watched.calls) == 0


def test_a_hanging_call_is_overdue_while_it_hangs_and_a_cancelled_one_is_its_variants() -> None:
    """Over the real API: a variant whose shards never answer, its calls cancelled by their
    callers. Past the objective: overdue while in flight; under it: cancelled."""
    async def go(objective_ms: float) -> list[GuardSample]:
        # One window for the whole test: the cancel falls in the overdue mark's window.
        watched = InFlight(objective_ms, 1e9, lambda: asyncio.get_running_loop().time())
        async with serving(FakeSearch(CHUNKS, silent=frozenset(range(4))), shard_timeout_s=30,
                           runtime_kw={"inflight": watched}) as (runtime, channel):
            runtime.live.offer(record(5, {"only": {"weight": 1}}))
            call = stub(channel).Retrieve(pb.RetrieveRequest(question="disk"))
            await eventually_async(lambda: len(watched.calls) == 1, "the call in flight")
            await asyncio.sleep(0.3)
            out = watched.drain()
            call.cancel()
            try:
                await call
            except asyncio.CancelledError:
                pass
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.CANCELLED
            await eventually_async(lambda: len(watched.calls) == 0, "the call ended")
            return out + watched.drain()
    hung = asyncio.run(go(objective_ms=100.0))
    assert [(s.variant, s.config_version, s.kind, s.slow) for s in hung] == [
        ("only", 5, "overdue", True)]  # its cancel falls in the same window: counted once
    given_up = asyncio.run(go(objective_ms=10_000.0))
    assert [(s.variant, s.kind, s.slow) for s in given_up] == [("only", "cancelled", False)]


def test_every_routed_method_ends_its_watch_once() -> None:
    """Query, StreamQuery and Retrieve each leave one `call` sample and nothing in flight;
    a caller's mistake leaves none."""
    async def go() -> list[GuardSample]:
        watched = InFlight(60_000.0, 1e9, lambda: asyncio.get_running_loop().time())
        async with serving(FakeSearch(CHUNKS), runtime_kw={"inflight": watched}) as (
                runtime, channel):
            runtime.live.offer(record(6, {"only": {"weight": 1}}))
            api = stub(channel)
            await api.Query(pb.QueryRequest(question="disk usage broker"))
            _ = [e async for e in api.StreamQuery(pb.QueryRequest(question="disk usage"))]
            await api.Retrieve(pb.RetrieveRequest(question="disk"))
            try:
                await api.Query(pb.QueryRequest(question="disk", top_k=-1))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert len(watched.calls) == 0
            return watched.drain()
    samples = asyncio.run(go())
    assert [(s.variant, s.config_version, s.kind, s.slow) for s in samples] == [
        ("only", 6, "call", False)] * 3
