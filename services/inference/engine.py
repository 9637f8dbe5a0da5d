"""A query end to end without gRPC: embed the question, scatter-gather, rerank, answer.

Every encoder call goes through one shared.batching Batcher (queries ahead of bulk Embed),
every generation through another. NotReadyError and NoShardsError hang from
shared.errors.InfrastructureError: neither is the caller's fault, and the API maps both to
UNAVAILABLE (QueueFullError, from the batcher, to RESOURCE_EXHAUSTED).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from services.inference import answer as extractive
from services.inference import render
from services.inference.feedback import FeedbackView, rerank
from services.inference.gather import GatherResult, SearchQuery
from services.inference.generation import Finished, GenerationRunner, Job
from services.inference.generator import CausalLM
from services.inference.metrics import BatcherMetrics, InferenceMetrics
from services.inference.params import QueryParams
from services.inference.prompt import pack_prompt
from services.inference.settings import InferenceSettings
from services.inference.vector_cache import VectorCache
from shared.batching.batcher import Batcher
from shared.batching.queue import INTERACTIVE, BatchLimits
from shared.errors import InfrastructureError
from shared.records import SearchHit

log = logging.getLogger(__name__)


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
    prompt_tokens: int
    completion_tokens: int
    answer_ms: float
    mode: str = extractive.ANSWER_MODE
    unit: str = "words"

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def estimate_tokens(text: str) -> int:
    """A cheap token estimate for the batcher's limit (wordpieces run ~1.3 per word, plus
    the two special tokens): tokenizing every text twice would cost more than it saves."""
    return len(text.split()) * 4 // 3 + 2


def encode_batch(encoder: TextEncoder, requests: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """One encoder call for a whole batch; a text several requests share is encoded once."""
    distinct = list(dict.fromkeys(t for texts in requests for t in texts))
    vectors = encoder.encode(distinct)
    row = {t: i for i, t in enumerate(distinct)}
    return [vectors[[row[t] for t in texts]] for texts in requests]


class QueryEngine:
    def __init__(self, settings: InferenceSettings, search: SearchBackend,
                 encoder: TextEncoder | None = None, metrics: InferenceMetrics | None = None,
                 feedback: FeedbackView | None = None) -> None:
        self.settings, self.search, self.encoder = settings, search, encoder
        self.metrics = metrics or InferenceMetrics()
        self.feedback = feedback
        s = settings
        self.embedder: Batcher[Sequence[str], np.ndarray] = Batcher(
            "embed", self._run_encoder, BatchLimits(s.embed_token_budget, s.embed_max_batch),
            s.queue_capacity, observer=BatcherMetrics(self.metrics, "embed", s.embed_max_batch))
        self.sentence_cache = VectorCache(s.sentence_cache_size)
        self.lm: CausalLM | None = None
        self.generator: Batcher[Job, None] | None = None

    @property
    def ready(self) -> bool:
        return self.encoder is not None and self.search.ready

    @property
    def answer_mode(self) -> str:
        return "generative" if self.lm is not None else extractive.ANSWER_MODE

    def start(self) -> None:
        self.embedder.start()

    async def stop(self) -> None:
        await self.embedder.stop()
        if self.generator is not None:
            await self.generator.stop()

    def attach_generator(self, lm: CausalLM, runner: GenerationRunner | None = None) -> None:
        s = self.settings
        self.lm = lm
        runner = runner or GenerationRunner(lm)
        self.generator = Batcher(
            "generate", runner, BatchLimits(s.gen_token_budget, s.gen_max_batch),
            s.queue_capacity, observer=BatcherMetrics(self.metrics, "generate", s.gen_max_batch))
        runner.on_step = self.metrics.decode_rows.observe
        if s.gen_continuous:
            runner.admit, runner.max_rows = self.generator.admit, s.gen_max_batch
        self.generator.start()

    async def encode(self, texts: Sequence[str], priority: int = INTERACTIVE) -> np.ndarray:
        if self.encoder is None:
            raise NotReadyError("warming up: the encoder is not loaded yet")
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        longest = max(estimate_tokens(t) for t in texts)
        return await self.embedder.submit(list(texts), len(texts), longest, priority)

    async def _run_encoder(self, requests: Sequence[Sequence[str]]) -> list[np.ndarray]:
        assert self.encoder is not None
        return await asyncio.to_thread(encode_batch, self.encoder, requests)

    async def retrieve(self, params: QueryParams, budget_s: float) -> Retrieval:
        """The merged top k for `params`, waiting at most `budget_s` for the shards."""
        if self.encoder is None or not self.search.ready:
            raise NotReadyError("warming up: the encoder or the reply consumer is not ready")
        started = time.perf_counter()
        vector = (await self.encode([params.question]))[0]
        embedded = time.perf_counter()
        # With feedback on, fetch twice the k so a boosted chunk just outside it can enter.
        fetch = params.top_k
        if self.feedback is not None and self.settings.feedback_weight > 0:
            fetch = min(self.settings.max_top_k, params.top_k * 2)
        query = SearchQuery(vector, self.encoder.model_id, self.encoder.dim, fetch,
                            params.since, params.until, params.domain, params.source)
        timeout_s = min(self.settings.shard_timeout_s, budget_s)
        result = await self.search.search(query, timeout_s)
        if not result.answered:
            raise NoShardsError(_no_shards_message(result, self.search.partitions, timeout_s))
        result = replace(result, hits=self._renderable(result.hits))
        if self.feedback is not None:
            hits = rerank(result.hits, self.feedback, self.settings.feedback_weight,
                          self.settings.feedback_max_boost)
            result = replace(result, hits=hits[: params.top_k])
        return Retrieval(params, vector, result, started, (embedded - started) * 1000,
                         (time.perf_counter() - embedded) * 1000)

    def _renderable(self, hits: Sequence[SearchHit]) -> tuple[SearchHit, ...]:
        """The hits with stored values that cannot be rendered emptied, each one counted."""
        out = []
        for hit in hits:
            clean, fields = render.clean_hit(hit)
            for name in fields:
                self.metrics.unrenderable.labels(field=name).inc()
            if fields:
                log.warning("chunk %r of %r: stored %s cannot be rendered; returned empty",
                            clean.chunk_id, clean.doc_id, ", ".join(fields))
            out.append(clean)
        return tuple(out)

    async def answer_stream(self, retrieval: Retrieval) -> AsyncIterator[str | Answer]:
        """The answer's text deltas, then the Answer itself as the last item."""
        if self.generator is not None:
            async for event in self._generate(retrieval):
                yield event
            return
        answer = await self._extract(retrieval)
        for piece in answer.pieces:
            yield piece
        yield answer

    async def answer(self, retrieval: Retrieval) -> Answer:
        async for event in self.answer_stream(retrieval):
            if isinstance(event, Answer):
                return event
        raise AssertionError("answer_stream ended without an Answer")

    async def _extract(self, retrieval: Retrieval) -> Answer:
        """Quote the retrieved sentences closest to the question, cut by the caller's limits."""
        started = time.perf_counter()
        texts = [hit.text for hit in retrieval.result.hits]
        candidates = extractive.candidate_sentences(texts)
        vectors = await self._sentence_vectors([c.text for c in candidates])
        picked = extractive.select_sentences(retrieval.vector, vectors,
                                             self.settings.answer_sentences)
        pieces = extractive.answer_pieces([candidates[i] for i in picked])
        params = retrieval.params
        kept, reason = extractive.apply_limits(pieces, params.stop, params.max_new_tokens)
        return Answer(tuple(kept), reason, extractive.word_count([params.question, *texts]),
                      extractive.word_count(kept), (time.perf_counter() - started) * 1000)

    async def _sentence_vectors(self, sentences: list[str]) -> np.ndarray:
        """Vectors of `sentences`, encoding only those the cache does not hold."""
        found, missing = self.sentence_cache.lookup(sentences)
        fresh = await self.encode(missing)
        self.sentence_cache.store(missing, fresh)
        self.metrics.cache.labels(result="hit").inc(len(sentences) - len(missing))
        self.metrics.cache.labels(result="miss").inc(len(missing))
        return self.sentence_cache.fill(sentences, found, missing, fresh)

    async def _generate(self, retrieval: Retrieval) -> AsyncIterator[str | Answer]:
        assert self.lm is not None and self.generator is not None
        started, s, params = time.perf_counter(), self.settings, retrieval.params
        max_new = min(params.max_new_tokens or s.default_max_new_tokens, s.max_new_tokens_cap)
        budget = min(s.prompt_token_budget, self.lm.prompt_room(max_new))
        prompt, _ = pack_prompt(params.question, [h.text for h in retrieval.result.hits],
                                self.lm.count_tokens, budget)
        job = Job(prompt, max_new, params.temperature, params.stop)
        item, _ = self.generator.enqueue(job, 1, budget + max_new, INTERACTIVE)
        pieces: list[str] = []
        try:
            while not isinstance(event := await job.events.get(), Finished):
                if isinstance(event, BaseException):
                    raise InfrastructureError(f"generation failed: {event}") from event
                pieces.append(event)
                yield event
        finally:
            job.cancelled = True  # a no-op once finished; frees the row if the caller left
            self.generator.cancel(item)
        yield Answer(tuple(pieces), event.reason, event.prompt_tokens, event.completion_tokens,
                     (time.perf_counter() - started) * 1000, "generative", "tokens")


def _no_shards_message(result: GatherResult, shards: int, timeout_s: float) -> str:
    if result.errors:
        failed = "; ".join(f"shard {p}: {e}" for p, e in sorted(result.errors.items()))
        return f"no retrieval shard returned results ({failed})"
    return (f"no retrieval shard answered within {timeout_s:.2f}s (0 of {shards}); "
            "is the retrieval service running?")
