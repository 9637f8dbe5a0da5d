"""The adaptive-wait batching that shared/batching replaced, rebuilt over its queue: a baseline.

Benches only: `python -m scripts.benchlib.adaptive_wait inference|embedding` runs that service
with its batchers swapped for this one, so one run can measure the old policy beside the
current one (scripts/bench_query, scripts/bench_ingest). Reproduced from the code before
the merge of wip-batching (75184ef). A batch is cut when it is full (requests or padded
tokens) or when its oldest request has waited `wait_s`; after each batch the wait adapts:
- inference (services/inference/{batcher,scheduler}.py): it halves when the batch took
  longer than 250 ms or ran alone, and grows x1.5 (to at most 20 ms) when the batch found
  company but was under half full; it starts at 4 ms (encoder) or 10 ms (generator);
- embedding (services/embedding/batcher.py, "latency" mode): it halves (to at least
  10 ms) when the oldest request waited over 1 s for its batch to be encoded, and grows
  x1.5 (to at most 100 ms) when a batch that was not full used under half the tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from shared.batching.batcher import Batcher
from shared.batching.padding import padded_tokens
from shared.batching.queue import BatchLimits, Request

T = TypeVar("T")
R = TypeVar("R")
MIN_GROWTH_S = 0.0005  # an adaptive wait of 0 must still be able to grow


class WaitPolicy(Protocol):
    wait_s: float

    def observe(self, batch: Sequence[Request[Any]], limits: BatchLimits, left: int,
                started: float, now: float) -> None: ...


@dataclass
class InferenceWait:
    wait_s: float
    ceiling_s: float = 0.020
    target_s: float = 0.250

    def observe(self, batch: Sequence[Request[Any]], limits: BatchLimits, left: int,
                started: float, now: float) -> None:
        size, max_batch = len(batch), limits.max_requests
        if now - started > self.target_s or size <= 1 < max_batch:
            self.wait_s = self.wait_s / 2
        elif size / max_batch < 0.5:
            self.wait_s = min(self.ceiling_s, max(self.wait_s * 1.5, MIN_GROWTH_S))


@dataclass
class EmbeddingWait:
    wait_s: float = 0.010
    floor_s: float = 0.010
    ceiling_s: float = 0.100
    target_s: float = 1.0

    def observe(self, batch: Sequence[Request[Any]], limits: BatchLimits, left: int,
                started: float, now: float) -> None:
        padded = padded_tokens(sum(r.sequences for r in batch), max(r.longest for r in batch))
        full = padded >= limits.max_tokens or len(batch) >= limits.max_requests or left > 0
        if now - min(r.enqueued for r in batch) > self.target_s:
            self.wait_s = max(self.floor_s, self.wait_s * 0.5)
        elif not full and padded < 0.5 * limits.max_tokens:
            self.wait_s = min(self.ceiling_s, self.wait_s * 1.5)


def policy_for(service: str, batcher: str) -> WaitPolicy:
    if service == "embedding":
        return EmbeddingWait()
    return InferenceWait(0.010 if batcher == "generate" else 0.004)


SERVICE = "inference"  # whose rules new batchers take; main() sets it


class AdaptiveWaitBatcher(Batcher[T, R]):
    """A Batcher whose loop waits (adaptively) for a batch to fill before cutting it."""

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(name, *args, **kwargs)
        self.wait = policy_for(SERVICE, name)

    def _due(self) -> float | None:
        """When the next batch should be cut; None while nothing is queued."""
        queued = self.queue.pending()
        if not queued:
            return None
        rows = sum(r.sequences for r in queued)
        if (len(queued) >= self.limits.max_requests or padded_tokens(
                rows, max(r.longest for r in queued)) >= self.limits.max_tokens):
            return float("-inf")
        return min(r.enqueued for r in queued) + self.wait.wait_s

    async def serve(self) -> None:
        while True:
            due = self._due()
            delay = None if due is None else due - self._clock()
            if delay is None or delay > 0:
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), delay)
                continue
            batch = self._cut(None)
            if batch:
                started = self._clock()
                await self._run_batch(batch)
                self.wait.observe(batch, self.limits, len(self.queue), started, self._clock())


def main(service: str) -> None:
    """Run `service` (inference or embedding) with every batcher on the adaptive wait."""
    global SERVICE
    SERVICE = service
    if service == "embedding":
        from services.embedding import agents
        agents.Embedding.batcher_class = AdaptiveWaitBatcher
    else:
        from services.inference import engine
        from services.inference.answer.generative import answerer
        engine.Batcher = AdaptiveWaitBatcher  # type: ignore[misc]
        answerer.Batcher = AdaptiveWaitBatcher  # type: ignore[misc]
    runpy.run_module(f"services.{service}", run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "inference")
