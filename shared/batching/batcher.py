"""The task that owns a RequestQueue: callers enqueue and await, it cuts and runs batches.

One batch runs at a time (an encoder or a generator is not thread-safe, and two forward
passes at once would only split the same cores). The loop cuts the next batch the moment
the previous one returns, from whatever queued meanwhile: no wait, no timer, no knob
(shared/batching/queue.py has the rules). A caller that goes away before its batch is cut
is dropped then and frees its slot; its work never reaches the backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from shared.batching.padding import padded_tokens
from shared.batching.queue import INTERACTIVE, BatchLimits, Request, RequestQueue

T = TypeVar("T")
R = TypeVar("R")
Runner = Callable[[Sequence[T]], Awaitable[Sequence[R]]]


class BatchObserver(Protocol):
    """Where a batcher reports (the inference service's Prometheus metrics, or nothing)."""

    def queued(self, size: int) -> None: ...
    def started(self, waits: Sequence[float]) -> None: ...
    def finished(self, requests: int, padded_tokens: int, seconds: float) -> None: ...


class NoObserver:
    def queued(self, size: int) -> None:
        pass

    def started(self, waits: Sequence[float]) -> None:
        pass

    def finished(self, requests: int, padded_tokens: int, seconds: float) -> None:
        pass


class Batcher(Generic[T, R]):
    """`run` gets each batch's payloads and returns one result (or exception) per payload.

    An exception raised by `run` goes to the batch's callers and the loop goes on; with
    `propagate`, it also ends the loop (for a worker that must crash and replay rather
    than lose the batch).
    """

    def __init__(self, name: str, run: Runner[T, R], limits: BatchLimits, capacity: int, *,
                 observer: BatchObserver | None = None, propagate: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self._run, self._clock, self._propagate = name, run, clock, propagate
        self.queue: RequestQueue[T] = RequestQueue(limits, capacity)
        self.observer: BatchObserver = observer or NoObserver()
        self._futures: dict[Request[T], asyncio.Future[R]] = {}
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.batches: list[int] = []  # sizes of the batches run, newest last (tests, bench)

    @property
    def limits(self) -> BatchLimits:
        return self.queue.limits

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.serve(), name=f"batcher-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def enqueue(self, payload: T, sequences: int, longest: int, priority: int = INTERACTIVE,
                deadline: float | None = None) -> tuple[Request[T], asyncio.Future[R]]:
        """Queue `payload`; raises QueueFullError when the queue is full of live callers.
        `deadline` is on this batcher's clock (time.monotonic by default)."""
        now = self._clock()
        if self.queue.full:
            self._drop(self.queue.purge(now, self._gone))
        request = self.queue.push(payload, sequences, longest, priority, now, deadline)
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._futures[request] = future
        self.observer.queued(len(self.queue))
        self._arrived.set()
        return request, future

    async def put(self, payload: T, sequences: int, longest: int,
                  priority: int = INTERACTIVE) -> asyncio.Future[R]:
        """Queue `payload`, waiting for room instead of refusing (back-pressure for a
        stream consumer); its result comes on the returned future."""
        while self.queue.full:
            self._room.clear()
            await self._room.wait()
        return self.enqueue(payload, sequences, longest, priority)[1]

    async def submit(self, payload: T, sequences: int, longest: int,
                     priority: int = INTERACTIVE, deadline: float | None = None) -> R:
        request, future = self.enqueue(payload, sequences, longest, priority, deadline)
        try:
            return await future
        except asyncio.CancelledError:
            self.cancel(request)
            raise

    def cancel(self, request: Request[T]) -> None:
        """Take a caller's request out now, if it has not been cut yet."""
        if self.queue.discard(request):
            self._futures.pop(request).cancel()
            self._freed()

    def admit(self, limit: int) -> list[T]:
        """Up to `limit` queued payloads for the batch now running (continuous batching).
        Their callers' futures resolve to None at once: the runner that admits them reports
        to them itself (generation jobs carry their own event queues)."""
        batch = self._cut(limit)
        for request in batch:
            future = self._futures.pop(request)
            if not future.done():
                future.set_result(None)  # type: ignore[arg-type]
        return [r.payload for r in batch]

    async def serve(self) -> None:
        """The loop: cut a batch whenever the backend is free and something is queued."""
        while True:
            batch = self._cut(None)
            if not batch:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            await self._run_batch(batch)

    def _gone(self, request: Request[T]) -> bool:
        return self._futures[request].done()

    def _cut(self, limit: int | None) -> list[Request[T]]:
        now = self._clock()
        cut = self.queue.cut(now, self._gone, limit)
        self._drop(cut.dropped)
        if cut.batch:
            self.observer.started([now - r.enqueued for r in cut.batch])
            self._freed()
        return cut.batch

    def _drop(self, dropped: list[Request[T]]) -> None:
        for request in dropped:
            future = self._futures.pop(request)
            if not future.done():  # past its deadline: its caller may still be listening
                future.set_exception(TimeoutError("deadline passed while queued"))
        if dropped:
            self._freed()

    def _freed(self) -> None:
        self.observer.queued(len(self.queue))
        self._room.set()

    async def _run_batch(self, batch: list[Request[T]]) -> None:
        futures = [self._futures.pop(r) for r in batch]
        padded = padded_tokens(sum(r.sequences for r in batch), max(r.longest for r in batch))
        self.batches.append(len(batch))
        started = self._clock()
        failure: Exception | None = None
        try:
            results: Sequence[Any] = await self._run([r.payload for r in batch])
        except Exception as exc:
            failure, results = exc, [exc] * len(batch)
        for future, result in zip(futures, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        self.observer.finished(len(batch), padded, self._clock() - started)
        if failure is not None and self._propagate:
            raise failure
