"""The search and answer steps of a query: embed, scatter-gather, feedback boost, rerank,
answer. pipeline.py walks a call through them (and the answer cache around them).

Each step lives in its own module. Encoder calls go through one
shared.batching Batcher (queries ahead of bulk Embed calls); the answer is extractive
(answer/extractor.py) or generated (answer/generative/answerer.py), per query as
answer/modes.py decides; either way its citations are checked (answer/citations.py).
The optional cross-encoder (rerank/) re-scores the top candidates through its own Batcher.
Failures: errors.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from services.inference import render
from services.inference.answer import citations, extractive, modes
from services.inference.answer.extractor import Extractor
from services.inference.answer.generative.answerer import GenerativeAnswerer
from services.inference.answer.generative.decode import GenerationRunner
from services.inference.answer.modes import ModeChoice
from services.inference.answer.result import Answer
from services.inference.answer.vector_cache import VectorCache, scoped
from services.inference.cache.key import scope_of
from services.inference.encoding import TextEncoder, encode_batch, estimate_tokens
from services.inference.errors import NoShardsError, NotReadyError
from services.inference.query import QueryParams
from services.inference.rerank.stage import RerankStage
from services.inference.search.feedback import FeedbackView, boost_by_feedback
from services.inference.search.gather import GatherResult
from services.inference.search.scatter import SearchQuery
from services.inference.settings import InferenceSettings
from services.inference.telemetry.metrics import BatcherMetrics, InferenceMetrics
from shared.batching.batcher import Batcher
from shared.batching.queue import INTERACTIVE, BatchLimits
from shared.contract.records import SearchHit

# Of auto's generation budget, the seconds (at most a fifth of it) kept back for the quoted
# answer that replaces a generation still running at its end.
EXTRACT_RESERVE_S = 1.0

if TYPE_CHECKING:  # it imports torch, loaded only when a generator is configured
    from services.inference.answer.generative.model import CausalLM

log = logging.getLogger(__name__)


class SearchBackend(Protocol):
    @property
    def ready(self) -> bool: ...
    @property
    def partitions(self) -> int: ...
    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult: ...


@dataclass(frozen=True)
class Retrieval:
    params: QueryParams
    vector: np.ndarray
    result: GatherResult
    started: float  # time.perf_counter() when the query began
    embed_ms: float
    retrieval_ms: float
    encoder_epoch: int = 0  # the engine's encoder epoch `vector` came from
    rerank_ms: float = 0.0
    # Per hit, its cross-encoder score; empty with the reranker off (rerank/order.py).
    rerank_scores: tuple[float | None, ...] = ()
    # The search's merged hits before the feedback boost, and after it (before the
    # reranker): what the answer cache checks a stored retrieval against (cache/).
    candidates: tuple[SearchHit, ...] = ()
    ranked: tuple[SearchHit, ...] = ()


class QueryEngine:
    def __init__(self, settings: InferenceSettings, search: SearchBackend,
                 encoder: TextEncoder | None = None, metrics: InferenceMetrics | None = None,
                 feedback: FeedbackView | None = None) -> None:
        self.settings, self.search, self.encoder = settings, search, encoder
        self.metrics = metrics or InferenceMetrics()
        self.feedback = feedback
        s = settings
        self.embedder: Batcher[Sequence[str], np.ndarray] = Batcher(
            "embed", self._run_encoder, BatchLimits(s.embed.token_budget, s.embed.max_batch),
            s.queue_capacity, observer=BatcherMetrics(self.metrics, "embed", s.embed.max_batch))
        self.questions = VectorCache(s.question_cache_size)
        self.extractor = Extractor(self.encode, s.answer_sentences, s.sentence_cache_size,
                                   self.metrics, s.answer_shortlist, s.text_kept_s)
        self.generative: GenerativeAnswerer | None = None
        # A generator that loads at the first call asking for generation (settings'
        # generator_load), and the name Info reports for it meanwhile.
        self.generator_on_demand: Callable[[], Awaitable[CausalLM | None]] | None = None
        self.generator_name = ""
        self._generator_lock = asyncio.Lock()
        # The verdicts on the generated answers of the last few minutes: auto quotes while
        # most were replaced as unsupported (answer/modes.py).
        self.quality = modes.QualityWindow(s.auto_quality_window_s, s.auto_min_kept_share)
        self.reranker: RerankStage | None = None
        if s.reranker_path is not None:
            self.reranker = RerankStage(
                s.rerank.candidates, BatchLimits(s.rerank.token_budget, s.rerank.max_batch),
                s.queue_capacity, s.rerank.max_length, self.metrics)
        # Bumped when the encoder is replaced by the next model's (switch.py): vectors of
        # two epochs never meet in one search, answer or cache.
        self.encoder_epoch = 0

    @property
    def ready(self) -> bool:
        return (self.encoder is not None and self.search.ready
                and (self.reranker is None or self.reranker.ready))

    @property
    def lm(self) -> CausalLM | None:
        return None if self.generative is None else self.generative.lm

    @property
    def answer_mode(self) -> str:
        """The path of a query that does not choose one (Info): the configured default, or
        extractive where no generator is loaded or waits to be."""
        if self.generative is None and self.generator_on_demand is None:
            return extractive.ANSWER_MODE
        return self.settings.answer_mode

    def defer_generator(self, load: Callable[[], Awaitable[CausalLM | None]],
                        name: str) -> None:
        """Load the generator with `load` at the first call that asks for generation."""
        self.generator_on_demand, self.generator_name = load, name

    async def ready_generator(self, params: QueryParams) -> None:
        """Load a deferred generator for a call that wants a generated answer (asked for by
        name, or the default mode); auto never waits for it: it quotes meanwhile."""
        if self.generative is not None or self.generator_on_demand is None:
            return
        if (params.answer_mode or params.settings(self.settings).answer_mode) != \
                modes.GENERATIVE:
            return
        async with self._generator_lock:
            if self.generative is None and self.generator_on_demand is not None:
                lm = await self.generator_on_demand()
                if lm is None:
                    raise NotReadyError("the generator could not be loaded")
                self.attach_generator(lm)
                log.info("generator %s loaded on demand on %s", lm.model_id, lm.device)

    def choose_mode(self, params: QueryParams, time_left_s: float | None,
                    elapsed_s: float = 0.0) -> ModeChoice:
        """The answer path of one query (answer/modes.py), counted by mode and reason.
        `time_left_s`: of the call's own deadline (None: it set none); `elapsed_s`: the
        call's time so far, taken from the server's default deadline where it set none."""
        load = None if self.generative is None else self.generative.load(params)
        default = params.settings(self.settings).answer_mode
        s = self.settings
        time_left_s = modes.time_to_judge(
            params.answer_mode or default, time_left_s, elapsed_s, s.auto_deadline_ms / 1000,
            s.default_deadline_ms / 1000 if s.default_deadline_ms else None)
        if self.generative is None and self.generator_on_demand is not None and \
                (params.answer_mode or default) == modes.AUTO:
            # A generator loaded on demand because auto would quote here anyway.
            choice = ModeChoice(modes.EXTRACTIVE, "latency_objective")
        else:
            choice = modes.choose(params.answer_mode, default, load, time_left_s,
                                  self.auto_objective_s, self.quality.ok(time.monotonic()))
        self.metrics.answer_modes.labels(mode=choice.mode, reason=choice.reason).inc()
        if choice.reason == "deadline" and self.generative is not None:
            self.generative.recheck()  # quoted on the estimate: let it be measured again
        return choice

    @property
    def auto_objective_s(self) -> float | None:
        """auto's latency objective in seconds (None: none): the setting, or by default a
        second where the generator decodes on a CPU and none on a GPU."""
        ms = self.settings.auto_latency_objective_ms
        if ms == 0:
            return None
        if ms > 0:
            return ms / 1000
        device = getattr(self.lm, "device", None)
        return None if getattr(device, "type", "cpu") == "cuda" else 1.0

    def start(self) -> None:
        self.embedder.start()
        if self.reranker is not None:
            self.reranker.start()

    async def stop(self) -> None:
        await self.embedder.stop()
        if self.reranker is not None:
            await self.reranker.stop()
        if self.generative is not None:
            await self.generative.stop()

    def switch_encoder(self, encoder: TextEncoder) -> None:
        """From now on encode with `encoder` (the next embedding model's); the vectors
        cached for the old one go with it."""
        self.encoder = encoder
        self.encoder_epoch += 1
        self.questions = VectorCache(self.settings.question_cache_size)
        self.extractor.cache = VectorCache(self.settings.sentence_cache_size,
                                           self.settings.text_kept_s)

    def attach_generator(self, lm: CausalLM, runner: GenerationRunner | None = None) -> None:
        self.generative = GenerativeAnswerer(lm, self.settings, self.metrics, runner)
        self.generative.start()

    async def encode(self, texts: Sequence[str], priority: int = INTERACTIVE) -> np.ndarray:
        if self.encoder is None:
            raise NotReadyError("warming up: the encoder is not loaded yet")
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        longest = max(estimate_tokens(t) for t in texts)
        while True:
            epoch = self.encoder_epoch
            vectors = await self.embedder.submit(list(texts), len(texts), longest, priority)
            if epoch == self.encoder_epoch:  # no switch while it was encoded
                return vectors

    async def _run_encoder(self, requests: Sequence[Sequence[str]]) -> list[np.ndarray]:
        assert self.encoder is not None
        return await asyncio.to_thread(encode_batch, self.encoder, requests)

    async def retrieve(self, params: QueryParams, budget_s: float) -> Retrieval:
        """The merged top k for `params`, waiting at most `budget_s` for the shards."""
        if self.encoder is None or not self.search.ready:
            raise NotReadyError("warming up: the encoder or the reply consumer is not ready")
        if self.reranker is not None and not self.reranker.ready:
            raise NotReadyError("warming up: the reranker is not loaded yet")
        started = time.perf_counter()
        vector = await self._question_vector(params)
        epoch = self.encoder_epoch  # the vector's: no await since it was made
        embedded = time.perf_counter()
        fetch = self._fetch(params)
        s = params.settings(self.settings)
        query = SearchQuery(vector, self.encoder.model_id, self.encoder.dim, fetch,
                            params.since, params.until, params.domain, params.source,
                            params.question if s.hybrid else "", s.fusion(),
                            access=params.access)
        timeout_s = min(s.shard_timeout_s, budget_s)
        result = await self.search.search(query, timeout_s)
        if not result.answered:
            raise NoShardsError(_no_shards_message(result, self.search.partitions, timeout_s))
        candidates = self._renderable(result.hits)
        result = replace(result, hits=self.feedback_order(params, candidates))
        searched = time.perf_counter()
        if not self._reranks(params):
            return Retrieval(params, vector, result, started, (embedded - started) * 1000,
                             (searched - embedded) * 1000, epoch, candidates=candidates,
                             ranked=result.hits)
        # The cross-encoder picks from the (feedback-ordered) candidates and has the last
        # word on their order.
        assert self.reranker is not None
        reranked = await self.reranker.rerank(params.question, result.hits, params.top_k)
        return Retrieval(params, vector, replace(result, hits=reranked.hits), started,
                         (embedded - started) * 1000, (searched - embedded) * 1000,
                         epoch, (time.perf_counter() - searched) * 1000, reranked.scores,
                         candidates, result.hits)

    def feedback_order(self, params: QueryParams,
                       candidates: Sequence[SearchHit]) -> tuple[SearchHit, ...]:
        """The search's hits as the feedback boost orders them now, cut to what the answer
        (or the reranker) is given; unchanged with feedback off."""
        if self.feedback is None:
            return tuple(candidates)
        s = params.settings(self.settings)
        hits = boost_by_feedback(candidates, self.feedback, s.feedback_weight,
                                 s.feedback_max_boost)
        return hits[:self._fetch(params) if self._reranks(params) else params.top_k]

    def _reranks(self, params: QueryParams) -> bool:
        """True when the cross-encoder re-scores this query: loaded, and not turned off by
        the query's configuration."""
        return self.reranker is not None and (params.served is None or params.served.rerank)

    def _fetch(self, params: QueryParams) -> int:
        """How many hits to ask the shards for."""
        # With feedback on, fetch twice the k so a boosted chunk just outside it can enter.
        fetch = params.top_k
        if self.feedback is not None and params.settings(self.settings).feedback_weight > 0:
            fetch = min(self.settings.max_top_k, params.top_k * 2)
        if self._reranks(params):
            fetch = max(fetch, self.settings.rerank.candidates)
        return fetch

    async def _question_vector(self, params: QueryParams) -> np.ndarray:
        """The question's vector; a question this caller's scope asked before (up to case
        and spacing, which the uncased tokenizer ignores too) is not encoded again. Kept per
        scope: a vector another caller left would answer faster (embed_ms, latency) and so
        tell this one what the other asked (docs/design/access-control.md)."""
        key = scoped(scope_of(params.access), question_key(params.question))
        found, missing = self.questions.lookup([key])
        self.metrics.question_cache.labels(result="miss" if missing else "hit").inc()
        if found[0] is not None:
            return found[0]
        vectors = await self.encode([params.question])
        self.questions.store(missing, vectors)
        return vectors[0]

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

    async def answer_stream(self, retrieval: Retrieval, choice: ModeChoice | None = None,
                            streamed: bool = True) -> AsyncIterator[str | Answer]:
        """The answer's text deltas, then the Answer itself as the last item, its citations
        checked. `choice` None: chosen now, without a deadline. A generation that outlasts
        auto's budget ends there: cut short where deltas were `streamed` to a reader, else
        replaced by the quoted answer."""
        hits = retrieval.result.hits
        choice = choice or self.choose_mode(retrieval.params, None)
        if choice.mode == modes.GENERATIVE and self.generative is not None:
            stream = self.generative.stream(retrieval.params, [h.text for h in hits])
            deadline = _generation_deadline(choice)
            sent: list[str] = []
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(stream)
                except TimeoutError:  # auto's budget ran out: the stream freed its row
                    await stream.aclose()
                    cut = bool(sent) and streamed  # what the caller has read stands
                    late = self._late(choice, sent, cut)
                    self.metrics.answer_modes.labels(
                        mode=modes.GENERATIVE if cut else modes.EXTRACTIVE,
                        reason="deadline_passed").inc()
                    if cut:
                        yield self._checked(late, hits)
                        return
                    break
                if isinstance(event, Answer):
                    yield self._checked(event, hits)
                    return
                sent.append(event)
                yield event
            answer = replace(await self._extract(retrieval), replaced=late.replaced)
        else:
            answer = await self._extract(retrieval)
        for piece in answer.pieces:
            yield piece
        yield self._checked(answer, hits)

    def _late(self, choice: ModeChoice, sent: Sequence[str], cut: bool) -> Answer:
        """What stands of a generation auto's budget `cut` short: the pieces already
        streamed (finish_reason "deadline"); and why, for the quoted answer otherwise."""
        why = (f"deadline: the generation outlasted the {choice.budget_s:.1f}s auto "
               "judged it by")
        why += ", cut short" if cut else ", extractive served"
        return Answer(tuple(sent), "deadline", 0, len(sent), 0.0, modes.GENERATIVE, "tokens",
                      replaced=why)

    def _checked(self, answer: Answer, hits: Sequence[SearchHit]) -> Answer:
        ids, texts = [h.chunk_id for h in hits], [h.text for h in hits]
        if answer.shown is None:
            check = citations.check_quoted(answer.text, ids, texts)
        else:
            check = citations.check_generated(answer.text, ids, texts, answer.shown)
        m = self.metrics
        if answer.mode == modes.GENERATIVE and answer.finish_reason != "deadline":
            kept = check.supported_share >= self.settings.generation_min_support
            self.quality.record(time.monotonic(), kept)
        m.answers_cited.labels(mode=answer.mode, cited_by=check.cited_by).inc()
        m.answer_support.labels(mode=answer.mode).observe(check.supported_share)
        if check.uncited:
            m.citation_flags.labels(mode=answer.mode, flag="uncited").inc()
        if check.unknown_markers:
            m.citation_flags.labels(mode=answer.mode, flag="unknown_marker").inc()
        return replace(answer, citations=check)

    async def _extract(self, retrieval: Retrieval) -> Answer:
        """The extractive answer, its question and sentence vectors from one encoder: done
        again if the encoder was switched meanwhile (see switch_encoder)."""
        vector = retrieval.vector
        while True:
            epoch = self.encoder_epoch
            if epoch != retrieval.encoder_epoch:
                vector = await self._question_vector(retrieval.params)
                epoch = self.encoder_epoch
            try:
                answer = await self.extractor.answer(retrieval.params, vector,
                                                     retrieval.result.hits)
            except ValueError:  # two models' vectors of different sizes met mid-switch
                if epoch == self.encoder_epoch:
                    raise
                continue
            if epoch == self.encoder_epoch:
                return answer
            retrieval = replace(retrieval, encoder_epoch=-1)  # encode the question again

    async def answer(self, retrieval: Retrieval, choice: ModeChoice | None = None) -> Answer:
        """The whole answer; a generated one whose sources do not support it (below
        generation_min_support) replaced by the extractive answer, which quotes them."""
        async for event in self.answer_stream(retrieval, choice, streamed=False):
            if isinstance(event, Answer):
                return await self._supported(retrieval, event)
        raise AssertionError("answer_stream ended without an Answer")

    async def _supported(self, retrieval: Retrieval, answer: Answer) -> Answer:
        share = answer.citations.supported_share if answer.citations is not None else 1.0
        if answer.mode != modes.GENERATIVE or share >= self.settings.generation_min_support:
            return answer
        self.metrics.answer_modes.labels(mode=modes.EXTRACTIVE, reason="unsupported").inc()
        quoted = self._checked(await self._extract(retrieval), retrieval.result.hits)
        return replace(quoted, replaced=f"unsupported: {share:.0%} of the generated "
                       "answer's sentences were grounded in its sources, extractive served")


def _generation_deadline(choice: ModeChoice) -> float | None:
    """The loop time by which auto's generation must end (None: unbounded here), a share of
    its budget kept back for the quoted answer that replaces a late one."""
    if choice.budget_s is None:
        return None
    reserve = min(EXTRACT_RESERVE_S, choice.budget_s / 5)
    return asyncio.get_running_loop().time() + choice.budget_s - reserve


def question_key(question: str) -> str:
    """The form under which a question's vector is cached: lower case, single spaces (the
    encoder's tokenizer lowercases and splits on whitespace, so the vector is the same)."""
    return " ".join(question.lower().split())


def _no_shards_message(result: GatherResult, shards: int, timeout_s: float) -> str:
    if result.errors:
        failed = "; ".join(f"shard {p}: {e}" for p, e in sorted(result.errors.items()))
        return f"no retrieval shard returned results ({failed})"
    return (f"no retrieval shard answered within {timeout_s:.2f}s (0 of {shards}); "
            "is the retrieval service running?")
