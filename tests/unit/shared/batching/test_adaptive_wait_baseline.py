"""The benches' baseline (tests/support/adaptive_wait.py) keeps the rules of the batching it
rebuilds: when a batch is due, and how the wait adapts (clock injected, nothing sleeps)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scripts.benchlib.adaptive_wait import AdaptiveWaitBatcher, EmbeddingWait, InferenceWait
from shared.batching.queue import BatchLimits, Request, RequestQueue

LIMITS = BatchLimits(max_tokens=100, max_requests=4)


def requests(*shapes: tuple[int, int, float]) -> list[Request[str]]:
    """(sequences, longest, enqueued) each, through a real queue."""
    q: RequestQueue[str] = RequestQueue(LIMITS, 100)
    return [q.push(f"r{i}", s, n, now=t) for i, (s, n, t) in enumerate(shapes)]


def test_inference_wait_halves_for_a_lone_or_slow_batch_and_grows_for_an_underfilled_one(
) -> None:
    wait = InferenceWait(0.004)
    one, two = requests((1, 5, 0.0)), requests((1, 5, 0.0), (1, 5, 0.0))
    wait.observe(one, LIMITS, 0, 0.0, 0.01)
    assert wait.wait_s == pytest.approx(0.002)  # nobody came while it waited
    wait.observe(two, LIMITS, 0, 0.0, 0.01)
    assert wait.wait_s == pytest.approx(0.002)  # half full (2 of 4): left alone
    wait.observe(two, BatchLimits(100, 8), 0, 0.0, 0.01)
    assert wait.wait_s == pytest.approx(0.003)  # company, but under half full: x1.5
    wait.observe(two, LIMITS, 0, 0.0, 0.3)
    assert wait.wait_s == pytest.approx(0.0015)  # over the 250 ms target
    for _ in range(20):
        wait.observe(two, BatchLimits(100, 8), 0, 0.0, 0.01)
    assert wait.wait_s == pytest.approx(0.020)  # the ceiling


def test_embedding_wait_keeps_its_floor_and_grows_only_for_batches_that_were_not_full(
) -> None:
    wait = EmbeddingWait()
    small = requests((1, 10, 0.0))
    wait.observe(small, LIMITS, 0, 0.0, 0.05)
    assert wait.wait_s == pytest.approx(0.015)
    wait.observe(small, LIMITS, 3, 0.0, 0.05)  # others were left queued: it was full
    assert wait.wait_s == pytest.approx(0.015)
    wait.observe(small, LIMITS, 0, 0.0, 2.0)  # the oldest waited past the 1 s target
    assert wait.wait_s == pytest.approx(0.010)  # halved, but not below the 10 ms floor
    for _ in range(20):
        wait.observe(small, LIMITS, 0, 0.0, 0.05)
    assert wait.wait_s == pytest.approx(0.100)


def test_a_batch_is_due_when_full_or_when_its_oldest_has_waited() -> None:
    async def never(payloads: Sequence[str]) -> list[str]:
        raise AssertionError("not run here")

    now = [10.0]
    batcher: AdaptiveWaitBatcher[str, str] = AdaptiveWaitBatcher(
        "embed", never, LIMITS, 100, clock=lambda: now[0])
    assert batcher._due() is None
    batcher.queue.push("a", 1, 5, now=10.0)
    batcher.queue.push("b", 1, 5, now=10.002)
    assert batcher._due() == pytest.approx(10.004)  # the oldest plus the encoder's first wait
    batcher.queue.push("c", 2, 40, now=10.003)  # 4 rows x 40 = 160 padded tokens > 100
    assert batcher._due() == float("-inf")
