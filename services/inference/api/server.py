"""The Inference gRPC API: deadlines, auth, health and reflection.

Status codes with reasons come from one interceptor (services/inference/api/status.py).
Who calls comes from another (auth.py): every search of a call is made with its principal's
Access, the answer cache is scoped by it, and feedback and Stats are checked against it
(docs/design/access-control.md).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import replace
from types import TracebackType
from typing import Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import SERVICE_NAME as HEALTH_SERVICE
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from services.inference.answer.result import Answer
from services.inference.api import convert, principal
from services.inference.api.auth import Authenticator, DeniedSink, TokenVerifier
from services.inference.api.status import DeadlineError, FailureSink, StatusMapper
from services.inference.audit.recorder import recorder as query_audit
from services.inference.cache.key import scope_of
from services.inference.cache.serve import CachedQueries, no_generation
from services.inference.config.live import LiveConfig
from services.inference.engine import QueryEngine, Retrieval
from services.inference.errors import NotFoundError, PermissionDeniedError
from services.inference.guard.inflight import InFlight
from services.inference.pipeline import LatencySink, QueryPipeline
from services.inference.query import QueryParams
from services.inference.search.feedback import check_feedback
from services.inference.search.served import Receipts
from services.inference.settings import InferenceSettings
from services.inference.telemetry.latency import LatencyStats
from services.inference.telemetry.metrics import InferenceMetrics
from services.inference.telemetry.streamstats import StatsView, check_filter
from shared.batching.queue import BULK
from shared.contract.query_config import VARIANT_NAME
from shared.errors import InfrastructureError, InvalidInput
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.tracing import spans

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Inference"].full_name
FEEDBACK_KINDS = {pb.FEEDBACK_KIND_CLICK: "click", pb.FEEDBACK_KIND_SKIP: "skip"}
# (chunk id, kind, variant, config version) of one click or skip
FeedbackSink = Callable[[str, str, str, int], Awaitable[None]]
LatencyView = Callable[[str], LatencyStats]  # the current minute's calls of a method
TIMED_METHODS = ("Query", "StreamQuery", "Retrieve", "Embed")
STATS_WINDOWS = {pb.STATS_WINDOW_MINUTE: "minute", pb.STATS_WINDOW_HOUR: "hour"}


class CallContext(Protocol):
    """What the servicer reads of a call besides its request: a gRPC ServicerContext, or
    the HTTP face's stand-in (rest.py), so both faces run these same methods."""

    def time_remaining(self) -> float | None: ...

    def peer(self) -> str: ...


class InferenceServicer(pb_grpc.InferenceServicer):
    def __init__(self, engine: QueryEngine, feedback_sink: FeedbackSink | None = None,
                 latency_sink: LatencySink | None = None,
                 latency_view: LatencyView | None = None,
                 stats_view: StatsView | None = None,
                 cache: CachedQueries | None = None, live: LiveConfig | None = None,
                 inflight: InFlight | None = None) -> None:
        self.engine, self.feedback_sink = engine, feedback_sink
        self.live = live or LiveConfig(engine.settings)
        self.latency_view, self.stats_view = latency_view, stats_view
        self.pipeline = QueryPipeline(
            engine, cache or CachedQueries(engine, no_generation, enabled=False),
            latency_sink, inflight)
        # The same proof carried by the caller, checked on any instance sharing the key.
        key = engine.settings.feedback_key
        self.receipts = Receipts(key.get_secret_value().encode() if key is not None
                                 else secrets.token_bytes(32))

    async def Query(self, request: pb.QueryRequest,
                    context: CallContext) -> pb.QueryResponse:
        clock = _CallClock(context, request.deadline_ms)
        async with self._guard(context, request.deadline_ms):
            answered = await self.pipeline.query(await self._params(request, context), clock)
        response = convert.query_response(answered.retrieval, answered.answer, answered.choice)
        self._receipts(answered.retrieval, response.citations)
        query_audit().answered("Query", request.question, response)
        return response

    async def StreamQuery(self, request: pb.QueryRequest, context: CallContext,
                          ) -> AsyncIterator[pb.StreamQueryResponse]:
        clock = _CallClock(context, request.deadline_ms)
        async with self._guard(context, request.deadline_ms):
            call = await self.pipeline.stream(await self._params(request, context), clock)
        # Citations first: the reader sees the sources early.
        start = convert.stream_start(call.retrieval, call.choice)
        self._receipts(call.retrieval, start.start.citations)
        end: pb.StreamQueryResponse | None = None
        try:  # a stream cut off after its citations is audited too (finally)
            yield start
            events = call.events()
            while end is None:
                async with self._guard(context, request.deadline_ms, clock.started):
                    event = await anext(events)
                if isinstance(event, Answer):
                    end = convert.stream_end(call.retrieval, event)
                    yield end
                else:
                    yield pb.StreamQueryResponse(delta=event)
        except (asyncio.CancelledError, GeneratorExit, DeadlineError):
            call.end("cancelled")  # the caller's cancel or deadline, mid-stream
            raise
        finally:
            call.end(None)
            query_audit().streamed(request.question, start, end)

    async def Retrieve(self, request: pb.RetrieveRequest,
                       context: CallContext) -> pb.RetrieveResponse:
        """Query's retrieval alone: the question encoded once, no answer, no sentence encoded."""
        clock = _CallClock(context, request.deadline_ms)
        async with self._guard(context, request.deadline_ms):
            served = self.live.serve(_caller(context, request.client_id), request.question)
            params = replace(convert.retrieve_params(request, served.settings, time.time()),
                             served=served, access=principal.current().access)
            retrieval = await self.pipeline.retrieve(params, clock)
        response = convert.retrieve_response(retrieval)
        self._receipts(retrieval, response.chunks)
        query_audit().retrieved(request.question, response)
        return response

    async def Embed(self, request: pb.EmbedRequest,
                    context: CallContext) -> pb.EmbedResponse:
        started = time.perf_counter()
        async with self._guard(context, request.deadline_ms):
            texts = self._embed_texts(request)
            vectors = await self.engine.encode(texts, priority=BULK)
        self.pipeline.finished("Embed", started)
        return convert.embed_response(self.engine, vectors)

    async def Feedback(self, request: pb.FeedbackRequest,
                       context: CallContext) -> pb.FeedbackResponse:
        async with self._guard(context, 0):
            chunk_id, kind = check_feedback(request.chunk_id,
                                            FEEDBACK_KINDS.get(request.kind, ""))
            self._check_shown(chunk_id, request.receipt)
            if self.feedback_sink is None:
                raise InfrastructureError("feedback is not enabled on this instance")
            variant = _reported_variant(request.variant)
            await self.feedback_sink(chunk_id, kind, variant, max(request.config_version, 0))
        return pb.FeedbackResponse(accepted=True)

    async def Info(self, request: pb.InfoRequest,
                   context: CallContext) -> pb.InfoResponse:
        view = self.latency_view
        latency = [] if view is None else [(m, view(m)) for m in TIMED_METHODS]
        return convert.info(self.engine, self.engine.search.partitions,
                            [(m, s) for m, s in latency if s.count], self.live.version,
                            self.live.variants)

    async def Stats(self, request: pb.StatsRequest,
                    context: CallContext) -> pb.StatsResponse:
        async with self._guard(context, 0):
            if not principal.current().access.all_access:
                # Counts per source and domain include documents this caller may not read.
                raise PermissionDeniedError(
                    "needs_all_access", "request",
                    "stream statistics count every document: only callers that read all "
                    "(the service account, or a server without auth) may see them")
            window = STATS_WINDOWS.get(request.window)
            if window is None:
                raise InvalidInput("unknown_window", "window",
                                   "STATS_WINDOW_MINUTE or STATS_WINDOW_HOUR")
            source = check_filter(request.source, "source")
            domain = check_filter(request.domain, "domain")
            if self.stats_view is None:
                raise InfrastructureError("stream statistics are not enabled on this instance")
            counts = self.stats_view(window, request.at, source, domain)
        return convert.stats_response(request.window, counts)

    def _receipts(self, retrieval: Retrieval, citations: Iterable[pb.Citation]) -> None:
        """Each citation's feedback receipt, for the scope the call was served."""
        scope = scope_of(retrieval.params.access)
        for c in citations:
            c.feedback_receipt = self.receipts.issue(scope, c.chunk_id)

    def _check_shown(self, chunk_id: str, receipt: str) -> None:
        """A restricted caller's feedback names a chunk it was shown (its receipt says so,
        or this instance remembers), else NOT_FOUND: the same answer for a chunk that does
        not exist, one it may not read, and a receipt forged, expired or of another caller."""
        access = principal.current().access
        if access.all_access:
            return
        scope = scope_of(access)
        if receipt and self.receipts.valid(scope, chunk_id, receipt):
            return
        if not self.pipeline.served.shown(scope, chunk_id):
            raise NotFoundError("unknown_chunk", "chunk_id",
                                "no chunk by that id was recently shown to this caller")

    def _embed_texts(self, request: pb.EmbedRequest) -> list[str]:
        s = self.engine.settings
        if not 1 <= len(request.texts) <= s.max_embed_texts:
            msg = f"1..{s.max_embed_texts} texts, got {len(request.texts)}"
            raise InvalidInput("texts_count_out_of_range", "texts", msg)
        for i, text in enumerate(request.texts):
            if not text.strip() or len(text) > s.max_question_chars:
                msg = f"texts[{i}] must be 1..{s.max_question_chars} characters, not blank"
                raise InvalidInput("bad_text", "texts", msg)
        return list(request.texts)

    def _guard(self, context: CallContext, deadline_ms: int,
               since: float | None = None) -> _Guard:
        return _Guard(deadline_ms, context, since, self.engine.settings.default_deadline_ms)

    async def _params(self, request: pb.QueryRequest,
                      context: CallContext) -> QueryParams:
        served = self.live.serve(_caller(context, request.client_id), request.question)
        return replace(convert.params(request, served.settings, time.time()), served=served,
                       access=principal.current().access)


class _Guard:
    """Enforces the request's own deadline_ms (from `since`, the call's start) and refuses a
    call whose deadline is already gone; the status of any failure is StatusMapper's. A call
    with neither deadline_ms nor a gRPC deadline gets the server's `default_ms` (0: none), so
    no call waits without end."""

    def __init__(self, deadline_ms: int, context: CallContext,
                 since: float | None, default_ms: int = 0) -> None:
        self.deadline_ms, self.context, self.default_ms = deadline_ms, context, default_ms
        self.since = since or time.perf_counter()
        self.defaulted = False
        self._timeout: asyncio.Timeout | None = None

    async def __aenter__(self) -> None:
        if self.deadline_ms < 0:
            raise InvalidInput("negative", "deadline_ms", "must not be negative")
        self.defaulted = not self.deadline_ms and _remaining(self.context) is None
        if self.defaulted:
            self.deadline_ms = self.default_ms
        if self.deadline_ms:
            left = self.deadline_ms / 1000 - (time.perf_counter() - self.since)
            self._timeout = asyncio.timeout(max(left, 0))
            await self._timeout.__aenter__()
        remaining = _remaining(self.context)
        if remaining is not None and remaining <= 0:
            raise DeadlineError("deadline already passed")

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool:
        if self._timeout is not None:
            try:
                await self._timeout.__aexit__(kind, exc, tb)
            except TimeoutError as timeout:
                if self.defaulted:
                    raise DeadlineError(
                        f"the server's default deadline of {self.deadline_ms} ms passed (the "
                        "call set none; set deadline_ms or a gRPC deadline for longer)",
                    ) from timeout
                raise DeadlineError(f"deadline_ms {self.deadline_ms} passed") from timeout
        return False


class _CallClock:
    """A call's time as gRPC knows it (pipeline.CallClock): the caller's gRPC deadline and
    the request's own deadline_ms, from the call's start."""

    def __init__(self, context: CallContext, deadline_ms: int) -> None:
        self.context, self.deadline_ms = context, deadline_ms
        self.started = time.perf_counter()

    def remaining(self) -> float | None:
        return _remaining(self.context)

    def left(self) -> float | None:
        return _time_left(self.context, self.deadline_ms, self.started)


def _reported_variant(variant: str) -> str:
    if variant and not VARIANT_NAME.match(variant):
        raise InvalidInput("bad_variant", "variant", "a variant name as a response gave it")
    return variant


def _caller(context: CallContext, client_id: str) -> str:
    """Who asks, for routing among variants: the client_id it names, else its verified
    principal (a user keeps its variant across token renewals), else its address without
    the port (a new connection keeps its variant)."""
    if client_id:
        return f"client:{client_id}"
    who = principal.current()
    if who.subject:
        return f"{who.kind}:{who.subject}"
    peer = context.peer() or ""
    return f"peer:{peer.rsplit(':', 1)[0] if peer.startswith(('ipv4:', 'ipv6:')) else peer}"


def _remaining(context: CallContext) -> float | None:
    return context.time_remaining()


def _time_left(context: CallContext, deadline_ms: int, started: float,
               ) -> float | None:
    """Seconds left of the earlier of the request's deadline_ms and the call's deadline."""
    left = [r for r in (_remaining(context),) if r is not None]
    if deadline_ms:
        left.append(deadline_ms / 1000 - (time.perf_counter() - started))
    return min(left) if left else None


def build_server(servicer: InferenceServicer, verifier: TokenVerifier,
                 health: health_aio.HealthServicer, settings: InferenceSettings,
                 ) -> tuple[grpc.aio.Server, int]:
    """The server with Inference, Health and reflection, bound (port 0 picks a free one).

    TLS when a cert and key are set; callers verified as auth.py says (open when no token
    and no JWT key is set).
    """
    m = servicer.engine.metrics
    # Status mapping first: it sees whatever any later interceptor or handler raises.
    # OpenTelemetry's (tracing on) outermost: its span covers the call, mapped status too.
    interceptors: list[grpc.aio.ServerInterceptor] = [
        *spans.server_interceptors(), StatusMapper(failure_sink(m)),
        Authenticator(verifier, denied_sink(m))]
    # gRPC's default metadata limits (8 KiB soft, 16 KiB hard) would refuse an oversized
    # token before the authenticator reads it: as INTERNAL at Go clients, which check the
    # limit themselves. Up to max_metadata_bytes the authenticator refuses it with a reason.
    size = settings.max_metadata_bytes
    server = grpc.aio.server(interceptors=interceptors, options=[
        ("grpc.max_metadata_size", size), ("grpc.absolute_max_metadata_size", size)])
    pb_grpc.add_InferenceServicer_to_server(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = (SERVICE_NAME, HEALTH_SERVICE, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    address = f"{settings.grpc_host}:{settings.grpc_port}"
    if settings.tls_cert is not None and settings.tls_key is not None:
        pair = (settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())
        return server, server.add_secure_port(address, grpc.ssl_server_credentials([pair]))
    return server, server.add_insecure_port(address)


def failure_sink(m: InferenceMetrics) -> FailureSink:
    """Counts a failed call by method and reason, whichever face it came by."""
    return lambda method, reason: m.failures.labels(method=method, reason=reason).inc()


def denied_sink(m: InferenceMetrics) -> DeniedSink:
    """Counts a refused caller by reason, whichever face it came by."""
    return lambda reason: m.auth_failures.labels(reason=reason).inc()


async def set_serving(health: health_aio.HealthServicer, serving: bool) -> None:
    """Set the overall ("") and the Inference service's health together."""
    status = (health_pb2.HealthCheckResponse.SERVING if serving
              else health_pb2.HealthCheckResponse.NOT_SERVING)
    for name in ("", SERVICE_NAME):
        await health.set(name, status)
