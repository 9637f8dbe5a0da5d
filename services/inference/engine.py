"""A query end to end without gRPC: embed the question, scatter-gather, answer.

NotReadyError and NoShardsError hang from shared.errors.InfrastructureError: neither is
the caller's fault, and the API maps both to UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from services.inference.answer import (
    answer_pieces,
    apply_limits,
    candidate_sentences,
    select_sentences,
    word_count,
)
from services.inference.gather import GatherResult, SearchQuery
from services.inference.params import QueryParams
from services.inference.settings import InferenceSettings
from shared.errors import InfrastructureError


class TextEncoder(Protocol):
    model_id: str
    dim: int
    device: object

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class SearchBackend(Protocol):
    @property
    def ready(self) -> bool: ...
    @property
    def partitions(self) -> int: ...
    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult: ...


class NotReadyError(InfrastructureError):
    """The encoder is still loading or the reply consumer is not reading."""


class NoShardsError(InfrastructureError):
    """No retrieval shard returned a usable reply in time."""


@dataclass(frozen=True)
class Retrieval:
    params: QueryParams
    vector: np.ndarray
    result: GatherResult
    started: float  # time.perf_counter() when the query began
    embed_ms: float
    retrieval_ms: float


@dataclass(frozen=True)
class Answer:
    pieces: tuple[str, ...]  # text deltas; joined, the answer
    finish_reason: str
    prompt_words: int
    completion_words: int
    answer_ms: float

    @property
    def text(self) -> str:
        return "".join(self.pieces)


class QueryEngine:
    def __init__(self, settings: InferenceSettings, search: SearchBackend,
                 encoder: TextEncoder | None = None) -> None:
        self.settings, self.search, self.encoder = settings, search, encoder
        self._encode_lock = asyncio.Lock()

    @property
    def ready(self) -> bool:
        return self.encoder is not None and self.search.ready

    async def retrieve(self, params: QueryParams, budget_s: float) -> Retrieval:
        """The merged top k for `params`, waiting at most `budget_s` for the shards."""
        if self.encoder is None or not self.search.ready:
            raise NotReadyError("warming up: the encoder or the reply consumer is not ready")
        started = time.perf_counter()
        vector = (await self._encode([params.question]))[0]
        embedded = time.perf_counter()
        query = SearchQuery(vector, self.encoder.model_id, self.encoder.dim, params.top_k,
                            params.since, params.until, params.domain, params.source)
        timeout_s = min(self.settings.shard_timeout_s, budget_s)
        result = await self.search.search(query, timeout_s)
        if not result.answered:
            raise NoShardsError(_no_shards_message(result, self.search.partitions, timeout_s))
        return Retrieval(params, vector, result, started, (embedded - started) * 1000,
                         (time.perf_counter() - embedded) * 1000)

    async def answer(self, retrieval: Retrieval) -> Answer:
        """The extractive answer over the retrieved chunks, cut by the caller's limits."""
        started = time.perf_counter()
        texts = [hit.text for hit in retrieval.result.hits]
        candidates = candidate_sentences(texts)
        vectors = await self._encode([c.text for c in candidates])
        picked = select_sentences(retrieval.vector, vectors, self.settings.answer_sentences)
        pieces = answer_pieces([candidates[i] for i in picked])
        params = retrieval.params
        kept, reason = apply_limits(pieces, params.stop, params.max_new_tokens)
        return Answer(tuple(kept), reason, word_count([params.question, *texts]),
                      word_count(kept), (time.perf_counter() - started) * 1000)

    async def _encode(self, texts: Sequence[str]) -> np.ndarray:
        assert self.encoder is not None
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        # One encode at a time: a fast tokenizer shared across threads fails ("Already
        # borrowed"), and two forward passes at once only split the same CPU cores.
        async with self._encode_lock:
            return await asyncio.to_thread(self.encoder.encode, texts)


def _no_shards_message(result: GatherResult, shards: int, timeout_s: float) -> str:
    if result.errors:
        failed = "; ".join(f"shard {p}: {e}" for p, e in sorted(result.errors.items()))
        return f"no retrieval shard returned results ({failed})"
    return (f"no retrieval shard answered within {timeout_s:.2f}s (0 of {shards}); "
            "is the retrieval service running?")
