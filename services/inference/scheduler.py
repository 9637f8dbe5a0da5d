"""The batcher's async side: callers enqueue and await; one loop cuts and runs batches.

Batches run one at a time (the encoder and the generator are not thread-safe, and two
forward passes at once would only split the same cores). A caller that goes away before
its batch starts leaves the queue at once, freeing its slot; the runner sees the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from services.inference.batcher import BatchQueue, Item
from services.inference.metrics import InferenceMetrics

T = TypeVar("T")
R = TypeVar("R")
Runner = Callable[[Sequence[T]], Awaitable[Sequence[R]]]


class BatchScheduler(Generic[T, R]):
    def __init__(self, name: str, queue: BatchQueue[T], run: Runner[T, R],
                 metrics: InferenceMetrics | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self.queue, self._run, self._clock = name, queue, run, clock
        self.metrics = metrics or InferenceMetrics()
        self._futures: dict[int, asyncio.Future[R]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.batches: list[int] = []  # sizes of the batches run, newest last (tests, bench)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"batcher-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def enqueue(self, payload: T, cost: int, priority: int) -> tuple[Item[T], asyncio.Future[R]]:
        """Queue `payload`; raises QueueFullError when the queue is at capacity."""
        item = self.queue.push(payload, cost, priority, self._clock())
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._futures[id(item)] = future
        self._gauge()
        self._wake.set()
        return item, future

    def cancel(self, item: Item[T]) -> None:
        if self.queue.discard(item):
            self._futures.pop(id(item)).cancel()
            self._gauge()

    async def submit(self, payload: T, cost: int, priority: int) -> R:
        item, future = self.enqueue(payload, cost, priority)
        try:
            return await future
        except asyncio.CancelledError:
            self.cancel(item)
            raise

    def admit(self, limit: int) -> list[T]:
        """Up to `limit` queued payloads, handed to the batch now running (continuous
        batching). Their callers' futures resolve to None at once: the runner that admits
        them reports to them itself (generation jobs carry their own event queues)."""
        batch = self.queue.take(limit)
        now = self._clock()
        for item in batch:
            self.metrics.queue_time.labels(batcher=self.name).observe(now - item.enqueued)
            future = self._futures.pop(id(item))
            if not future.done():
                future.set_result(None)  # type: ignore[arg-type]
        self._gauge()
        return [i.payload for i in batch]

    async def _loop(self) -> None:
        while True:
            due = self.queue.due()
            delay = None if due is None else due - self._clock()
            if delay is None or delay > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
                continue
            await self._run_batch(self.queue.take())

    async def _run_batch(self, batch: list[Item[T]]) -> None:
        self._gauge()
        started = self._clock()
        m, label = self.metrics, {"batcher": self.name}
        for item in batch:
            m.queue_time.labels(**label).observe(started - item.enqueued)
        futures = [self._futures.pop(id(i)) for i in batch]
        self.batches.append(len(batch))
        try:
            results: Sequence[Any] = await self._run([i.payload for i in batch])
        except Exception as exc:  # the batch's callers get the error; the loop goes on
            results = [exc] * len(batch)
        latency = self._clock() - started
        for future, result in zip(futures, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        self.queue.policy.observe(len(batch), self.queue.max_batch, latency)
        m.batch_size.labels(**label).observe(len(batch))
        m.batch_fill.labels(**label).observe(len(batch) / self.queue.max_batch)
        m.batch_time.labels(**label).observe(latency)
        m.batch_wait.labels(**label).set(self.queue.policy.wait_s)

    def _gauge(self) -> None:
        self.metrics.queue_size.labels(batcher=self.name).set(len(self.queue))
