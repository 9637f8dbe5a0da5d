"""The rerank stage in the engine: a query's candidates re-scored through one batcher.

Each query is one request to a shared.batching Batcher (the machinery the question encoder
uses: a batch is cut whenever the model is free, bounded by requests and padded tokens), so
concurrent queries share forward passes. The scorer runs in a worker thread, one batch at a
time. Each call's time, queue wait included, goes to the rerank latency histogram.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from prometheus_client import Histogram

from services.inference.encoding import estimate_tokens
from services.inference.errors import NotReadyError
from services.inference.rerank.order import Reranked, reorder, split
from services.inference.telemetry.metrics import BatcherMetrics, InferenceMetrics
from shared.batching.batcher import Batcher
from shared.batching.queue import INTERACTIVE, BatchLimits
from shared.contract.records import SearchHit
from shared.encoder.passage import passage

_LATENCY_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
Pairs = tuple[str, tuple[str, ...]]  # one query: the question and its candidates' passages


class PairScorer(Protocol):
    """A cross-encoder: one relevance score per (question, passage) pair. Not thread-safe."""

    model_id: str

    @property
    def device(self) -> object: ...

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


class RerankStage:
    def __init__(self, candidates: int, limits: BatchLimits, capacity: int, max_length: int,
                 metrics: InferenceMetrics) -> None:
        self.candidates, self.max_length = candidates, max_length
        self.scorer: PairScorer | None = None
        self.batcher: Batcher[Pairs, np.ndarray] = Batcher(
            "rerank", self._run, limits, capacity,
            observer=BatcherMetrics(metrics, "rerank", limits.max_requests))
        self.latency = Histogram("streamrag_inference_rerank_seconds",
                                 "Reranking one query's candidates, queue wait included",
                                 buckets=_LATENCY_S, registry=metrics.registry)

    @property
    def ready(self) -> bool:
        return self.scorer is not None

    def attach(self, scorer: PairScorer) -> None:
        self.scorer = scorer

    def start(self) -> None:
        self.batcher.start()

    async def stop(self) -> None:
        await self.batcher.stop()

    async def rerank(self, question: str, hits: Sequence[SearchHit], top_k: int,
                     priority: int = INTERACTIVE) -> Reranked[SearchHit]:
        """The hits with the first `candidates` re-scored and reordered, cut to `top_k`."""
        if self.scorer is None:
            raise NotReadyError("warming up: the reranker is not loaded yet")
        head, rest = split(hits, self.candidates)
        if not head:
            return Reranked((), ())
        started = time.perf_counter()
        passages = tuple(passage(h.title.strip(), h.text) for h in head)
        longest = min(self.max_length,
                      estimate_tokens(question) + max(estimate_tokens(p) for p in passages))
        scores = await self.batcher.submit((question, passages), len(passages), longest,
                                           priority)
        self.latency.observe(time.perf_counter() - started)
        return reorder(head, scores.tolist(), rest, top_k)

    async def _run(self, requests: Sequence[Pairs]) -> list[np.ndarray]:
        scorer = self.scorer
        assert scorer is not None
        return await asyncio.to_thread(score_batch, scorer, requests)


def score_batch(scorer: PairScorer, requests: Sequence[Pairs]) -> list[np.ndarray]:
    """One scorer call for a whole batch of queries; each query's scores, in its order."""
    pairs = [(question, p) for question, passages in requests for p in passages]
    scores = np.asarray(scorer.score(pairs), dtype=np.float32)
    if scores.shape != (len(pairs),):
        msg = f"the reranker returned {scores.shape} scores for {len(pairs)} pairs"
        raise ValueError(msg)
    out, start = [], 0
    for _, passages in requests:
        out.append(scores[start:start + len(passages)])
        start += len(passages)
    return out
