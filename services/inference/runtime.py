"""The gRPC server, search client, encoder and generator as one mode.Service in the worker.

The server binds first and reports NOT_SERVING, so health checks answer during the
warm-up; it turns SERVING once the reply consumer is positioned and the encoder (and the
generator and the reranker, when configured) has run once, and NOT_SERVING again as soon
as shutdown begins.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import grpc
import mode
from aiohttp import web
from grpc_health.v1.health import aio as health_aio

from services.inference.answer.generative import weights
from services.inference.api.auth import TokenVerifier
from services.inference.api.rest import RestFace, serve
from services.inference.api.server import (
    FeedbackSink,
    InferenceServicer,
    LatencySink,
    LatencyView,
    build_server,
    denied_sink,
    failure_sink,
    set_serving,
)
from services.inference.cache.serve import CachedQueries, no_generation
from services.inference.config import reader
from services.inference.config.live import LiveConfig, Refusal
from services.inference.encoding import TextEncoder
from services.inference.engine import QueryEngine, SearchBackend
from services.inference.guard.inflight import InFlight
from services.inference.rerank.stage import PairScorer
from services.inference.search.client import SearchClient
from services.inference.search.feedback import FeedbackView
from services.inference.settings import InferenceSettings
from services.inference.switch import ModelSwitch
from services.inference.telemetry.metrics import InferenceMetrics
from services.inference.telemetry.streamstats import StatsView, WindowCollector
from shared.contract.topics import CONFIG_QUERY
from shared.errors import InfrastructureError
from shared.settings import KafkaSettings
from shared.worker.lean_imports import DEEP_LEARNING, allow

if TYPE_CHECKING:  # torch, loaded only when a generator is configured; the MCP SDK
    from services.inference.answer.generative.model import CausalLM
    from services.inference.api.mcpface import McpFace

log = logging.getLogger(__name__)
WARM_STEPS = 4  # decode steps of the generator's warm-up
# How long a starting instance waits to have read config.query.v1 to its end before it
# turns SERVING (so it does not answer with an older configuration than its peers).
CONFIG_CATCH_UP_S = 10.0


class ManagedSearch(SearchBackend, Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def load_encoder(settings: InferenceSettings, next_model: bool = False) -> TextEncoder:
    """The query encoder of the current model (or, `next_model`, of the next one)."""
    from shared.encoder.runtime import load_encoder as load  # torch/onnxruntime load here

    path, model_id = ((settings.next_model_path, settings.next_model_id) if next_model
                      else (settings.model_path, settings.encoder_model_id()))
    encoder = load(settings.encoder_runtime, settings.device, settings.encoder_threads,
                   settings.model_cache_dir, path, model_id, int8=settings.encoder_int8,
                   workers=settings.encoder_workers)
    encoder.encode(["warm-up"])  # the first forward pass is the slow one; pay it before SERVING
    return encoder


def load_generator(settings: InferenceSettings) -> CausalLM | None:
    src = settings.generator_source()
    if src is None:
        return None
    allow(*DEEP_LEARNING)  # forgone until now where the generator loads on demand
    from services.inference.answer.generative.model import CausalLM  # torch loads here

    lm = CausalLM(src, settings.device, settings.model_cache_dir)
    # Pay the first forward passes before SERVING (the very first is slow), then time a
    # second round: `auto` mode's first estimates of the pace (answer/generative/
    # answerer.py) come from it.
    prompt = lm.render("Answer briefly.", "Passages:\n[1] warm-up\n\nQuestion: warm-up?")
    for _ in range(2):
        started = time.perf_counter()
        state = lm.prefill([prompt], WARM_STEPS)
        prefilled = time.perf_counter()
        for _ in range(WARM_STEPS):
            state = lm.step(state, state.logits.argmax(dim=-1))
    lm.warm_first_token_s = prefilled - started
    lm.warm_per_token_s = (time.perf_counter() - prefilled) / WARM_STEPS
    return lm


def load_reranker(settings: InferenceSettings) -> PairScorer | None:
    if settings.reranker_path is None:
        return None
    from services.inference.rerank.model import CrossEncoder  # torch loads here

    scorer = CrossEncoder(settings.reranker_path, settings.device,
                          settings.rerank.max_length, settings.rerank.token_budget)
    scorer.score([("warm-up", "warm-up")])  # pay the first forward pass before SERVING
    return scorer


class InferenceRuntime(mode.Service):
    def __init__(self, settings: InferenceSettings, kafka: KafkaSettings, *,
                 search: ManagedSearch | None = None,
                 encoder_factory: Callable[[], TextEncoder] | None = None,
                 generator_factory: Callable[[], CausalLM | None] | None = None,
                 reranker_factory: Callable[[], PairScorer | None] | None = None,
                 feedback_sink: FeedbackSink | None = None,
                 feedback_view: FeedbackView | None = None,
                 latency_sink: LatencySink | None = None,
                 latency_view: LatencyView | None = None,
                 stats_view: StatsView | None = None,
                 follow_config: bool = False,
                 after_serving: Callable[[], Awaitable[Any]] | None = None,
                 inflight: InFlight | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        # Run once the server has answered its last call on stop, while the producer is
        # still up: the query audits of the calls the grace period finished (audit/agents.py).
        self._after_serving = after_serving
        self.metrics = InferenceMetrics()
        self.search: ManagedSearch = search or SearchClient(
            kafka, max_batch=settings.search_max_batch, local=settings.local_search,
            on_search=lambda path: self.metrics.searches.labels(path=path).inc())
        self.engine = QueryEngine(settings, self.search, metrics=self.metrics,
                                  feedback=feedback_view)
        # Only the real client can tell the in-process shards' generation; any other
        # backend's cached answers are revalidated by a search (cache/serve.py).
        self.cache = CachedQueries(self.engine, self.search.generation
                                   if isinstance(self.search, SearchClient) else no_generation)
        # The query configuration of config.query.v1 (follow_config: read from the broker).
        self.live = LiveConfig(settings, self._config_applied, self._config_refused)
        self._kafka, self._follow_config = kafka, follow_config
        self.health = health_aio.HealthServicer()
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self.http: web.AppRunner | None = None  # the HTTP/JSON face, when http_port is set
        self.http_port = 0
        self.mcp: McpFace | None = None  # the MCP face, when mcp_port is set
        self.mcp_port = 0
        self._warm = False
        self._feedback_sink = feedback_sink
        self._latency_sink, self._latency_view = latency_sink, latency_view
        self._stats_view = stats_view
        self._inflight = inflight  # routed calls, for the SLO guard (guard/inflight.py)
        if stats_view is not None:
            self.metrics.registry.register(WindowCollector(stats_view))
        self._encoder_factory = encoder_factory or (lambda: load_encoder(settings))
        self._generator_factory = generator_factory or (lambda: load_generator(settings))
        self._reranker_factory = reranker_factory or (lambda: load_reranker(settings))
        self.switch: ModelSwitch | None = None
        if settings.next_model_id:
            self.switch = ModelSwitch(self.engine, self.search,
                                      lambda: load_encoder(settings, next_model=True),
                                      settings.switch_check_s, settings.shard_timeout_s)

    async def on_start(self) -> None:
        await set_serving(self.health, False)
        if self.settings.metrics_port:
            self.metrics.serve(self.settings.grpc_host, self.settings.metrics_port)
        self.engine.start()
        # One servicer and one verifier behind every face: the HTTP handlers only convert.
        servicer = InferenceServicer(
            self.engine, self._feedback_sink, self._latency_sink, self._latency_view,
            self._stats_view, self.cache, self.live, self._inflight)
        verifier = TokenVerifier(self.settings, self.metrics.auth_ignored_groups.inc)
        self.server, self.port = build_server(servicer, verifier, self.health, self.settings)
        if self.port == 0:
            msg = f"cannot bind gRPC on {self.settings.grpc_host}:{self.settings.grpc_port}"
            raise OSError(msg)
        await self.server.start()
        log.info("inference gRPC listening on %s:%d", self.settings.grpc_host, self.port)
        if self.settings.http_port:
            face = RestFace(servicer, verifier, failure_sink(self.metrics),
                            denied_sink(self.metrics))
            self.http, self.http_port = await serve(face, self.settings)
            log.info("inference HTTP listening on %s:%d", self.settings.grpc_host,
                     self.http_port)
        if self.settings.mcp_port:
            # The MCP SDK (about a second to import) only where the face is served.
            from services.inference.api.mcpface import McpFace

            self.mcp = McpFace(servicer, verifier, failure_sink(self.metrics),
                               denied_sink(self.metrics))
            self.mcp_port = await self.mcp.start(self.settings)
            log.info("inference MCP listening on %s:%d/mcp", self.settings.grpc_host,
                     self.mcp_port)

    @mode.Service.task
    async def _warm_up(self) -> None:
        # A failure here crashes the service, and with it the worker: loud, for the
        # supervisor to restart, rather than a server that never turns SERVING.
        await self.search.start()
        config_read = asyncio.Event()
        if self._follow_config:  # it retries a broker it cannot reach; never ends by itself
            self.add_future(reader.follow(self._kafka, self.live, config_read))
        else:
            config_read.set()
        self.engine.encoder = await asyncio.to_thread(self._encoder_factory)
        src = self.settings.generator_source()
        if src is not None and self.settings.generator_on_demand():
            factory = self._generator_factory
            self.engine.defer_generator(lambda: asyncio.to_thread(factory),
                                        weights.model_name(src))
            log.info("generator %s loads at the first call that asks for a generated answer "
                     "(STREAMRAG_INFERENCE_GENERATOR_LOAD): on a CPU auto quotes within its "
                     "latency objective", weights.model_name(src))
        else:
            lm = await asyncio.to_thread(self._generator_factory)
            if lm is not None:
                self.engine.attach_generator(lm)
                log.info("generator %s on %s (%s)", lm.model_id, lm.device, lm.dtype)
        if self.engine.reranker is not None:
            scorer = await asyncio.to_thread(self._reranker_factory)
            if scorer is None:
                raise InfrastructureError("a reranker is configured but none was loaded")
            self.engine.reranker.attach(scorer)
            log.info("reranker %s on %s, %d candidates", scorer.model_id, scorer.device,
                     self.settings.rerank.candidates)
        try:
            await asyncio.wait_for(config_read.wait(), CONFIG_CATCH_UP_S)
        except TimeoutError:
            log.warning("%s not read to its end in %.0fs; serving configuration version %d",
                        CONFIG_QUERY.name, CONFIG_CATCH_UP_S, self.live.version)
        await set_serving(self.health, True)
        self._warm = True
        encoder = self.engine.encoder
        log.info("inference SERVING (encoder on %s, %s, %s)", encoder.device,
                 getattr(encoder, "runtime", "torch"), getattr(encoder, "dtype", "float32"))
        if self.switch is not None:
            self.add_future(self.switch.run())  # a failure crashes the service, loudly

    @mode.Service.timer(1.0)
    async def _check_reader(self) -> None:
        # A dead reply reader would leave a SERVING server whose every query times out:
        # crash instead, so the supervisor restarts the worker.
        if self._warm and not self.search.ready and not self.should_stop:
            await set_serving(self.health, False)
            await self.crash(InfrastructureError("the search reply reader stopped"))

    def _config_applied(self, version: int) -> None:
        # Answers of an older configuration are never found again (cache/key.py).
        self.cache.config_version = f"{self.cache.settings_version}@{version}"
        self.metrics.config_version.set(version)

    def _config_refused(self, refusal: Refusal) -> None:
        self.metrics.config_refused.labels(reason=refusal.reason).inc()

    async def on_stop(self) -> None:
        await self.health.enter_graceful_shutdown()
        # Every face finishes its calls in flight (grace_s) before the engine stops.
        stopping = [self.server.stop(self.settings.grace_s)] if self.server is not None else []
        if self.http is not None:
            stopping.append(self.http.cleanup())
        if self.mcp is not None:
            stopping.append(self.mcp.stop())
        await asyncio.gather(*stopping)
        if self._after_serving is not None:
            try:
                await self._after_serving()
            except Exception:  # stopping anyway: say what may be lost, then go on
                log.exception("the last answered calls' query audits were not all sent")
        await self.engine.stop()
        await self.search.stop()
