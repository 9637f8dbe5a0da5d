"""The batching loop: batches cut when the backend is free, results routed, leavers dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.batching.batcher import Batcher
from shared.batching.queue import BatchLimits, QueueFullError
from tests.support.polling import eventually_async


class Backend:
    """Doubles each payload; can be held busy to let requests pile up."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.free = asyncio.Event()
        self.free.set()

    async def __call__(self, payloads: Sequence[int]) -> list[int]:
        self.calls.append(list(payloads))
        await self.free.wait()
        return [p * 2 for p in payloads]


def test_a_lone_request_runs_at_once_and_batches_grow_only_while_the_backend_is_busy() -> None:
    async def scenario() -> tuple[list[list[int]], list[int]]:
        backend = Backend()
        batcher: Batcher[int, int] = Batcher("t", backend, BatchLimits(1000, 8), 100)
        batcher.start()
        first = asyncio.create_task(batcher.submit(1, 1, 1))
        # The loop picks it up alone: nothing waits to fill (interval 0: yield, no sleep).
        await eventually_async(lambda: backend.calls, "the first call", interval_s=0)
        backend.free.clear()  # the backend is now busy with ... nothing new; hold the next
        second = asyncio.create_task(batcher.submit(2, 1, 1))
        await eventually_async(lambda: len(backend.calls) >= 2, "the second call", interval_s=0)
        rest = [asyncio.create_task(batcher.submit(n, 1, 1)) for n in range(3, 7)]
        await asyncio.sleep(0)
        backend.free.set()
        results = await asyncio.gather(first, second, *rest)
        await batcher.stop()
        return backend.calls, results

    calls, results = asyncio.run(scenario())
    assert calls == [[1], [2], [3, 4, 5, 6]]
    assert results == [2, 4, 6, 8, 10, 12]


def test_a_backend_failure_reaches_the_batch_callers_and_the_loop_goes_on() -> None:
    async def scenario() -> tuple[str, int]:
        async def run(payloads: Sequence[int]) -> list[int]:
            if 0 in payloads:
                raise RuntimeError("model broke")
            return list(payloads)

        batcher: Batcher[int, int] = Batcher("t", run, BatchLimits(1000, 1), 100)
        batcher.start()
        with pytest.raises(RuntimeError) as failed:
            await batcher.submit(0, 1, 1)
        ok = await batcher.submit(7, 1, 1)
        await batcher.stop()
        return str(failed.value), ok

    assert asyncio.run(scenario()) == ("model broke", 7)


def test_with_propagate_a_failure_ends_the_loop() -> None:
    async def scenario() -> None:
        async def run(payloads: Sequence[int]) -> list[int]:
            raise RuntimeError("fatal")

        batcher: Batcher[int, int] = Batcher("t", run, BatchLimits(1000, 4), 100,
                                             propagate=True)
        future = await batcher.put(1, 1, 1)
        with pytest.raises(RuntimeError, match="fatal"):
            await batcher.serve()
        assert isinstance(future.exception(), RuntimeError)

    asyncio.run(scenario())


def test_put_waits_for_room_where_enqueue_refuses() -> None:
    async def scenario() -> list[int]:
        backend = Backend()
        batcher: Batcher[int, int] = Batcher("t", backend, BatchLimits(1000, 1), 1)
        await batcher.put(1, 1, 1)
        with pytest.raises(QueueFullError):
            batcher.enqueue(2, 1, 1)
        blocked = asyncio.create_task(batcher.put(2, 1, 1))
        await asyncio.sleep(0)
        assert not blocked.done()  # held back until the loop takes 1
        batcher.start()
        second = await blocked
        assert await second == 4
        await batcher.stop()
        return [c[0] for c in backend.calls]

    assert asyncio.run(scenario()) == [1, 2]


def test_an_expired_deadline_is_dropped_and_told() -> None:
    async def scenario() -> list[list[int]]:
        now = [0.0]
        backend = Backend()
        batcher: Batcher[int, int] = Batcher("t", backend, BatchLimits(1000, 8), 100,
                                             clock=lambda: now[0])
        _, expired = batcher.enqueue(1, 1, 1, deadline=5.0)
        _, fine = batcher.enqueue(2, 1, 1, deadline=50.0)
        now[0] = 10.0
        batcher.start()
        assert await fine == 4
        with pytest.raises(TimeoutError):
            await expired
        await batcher.stop()
        return backend.calls

    assert asyncio.run(scenario()) == [[2]]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 64), st.booleans()),
                min_size=1, max_size=30),
       st.integers(1, 300), st.integers(1, 6))
def test_every_staying_caller_gets_its_own_result_once_and_leavers_never_run(
        items: list[tuple[int, int, bool]], max_tokens: int, max_requests: int) -> None:
    async def scenario() -> tuple[Backend, dict[int, int], set[int]]:
        backend = Backend()
        backend.free.clear()  # requests pile up behind a busy backend
        batcher: Batcher[int, int] = Batcher("t", backend, BatchLimits(max_tokens, max_requests),
                                             1000)
        batcher.start()
        warm = asyncio.create_task(batcher.submit(-1, 1, 1))
        await eventually_async(lambda: backend.calls, "the warm-up call", interval_s=0)
        tasks = {n: asyncio.create_task(batcher.submit(n, s, longest))
                 for n, (s, longest, _) in enumerate(items)}
        await asyncio.sleep(0)
        leavers = {n for n, (*_, leaves) in enumerate(items) if leaves}
        for n in leavers:
            tasks[n].cancel()
        backend.free.set()
        await warm
        done = await asyncio.gather(*tasks.values(), return_exceptions=True)
        await batcher.stop()
        return backend, {n: r for n, r in zip(tasks, done, strict=True)
                         if not isinstance(r, BaseException)}, leavers

    backend, results, leavers = asyncio.run(scenario())
    staying = set(range(len(items))) - leavers
    assert results == {n: 2 * n for n in staying}
    ran = [p for call in backend.calls[1:] for p in call]
    assert sorted(ran) == sorted(staying)  # once each; no leaver reached the backend
    for call in backend.calls[1:]:
        assert len(call) <= max_requests
        rows = sum(items[p][0] for p in call)
        assert len(call) == 1 or rows * max(items[p][1] for p in call) <= max_tokens
