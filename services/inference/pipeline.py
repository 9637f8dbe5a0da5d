"""One call's path, read forward: the answer cache, the search, the answer path's choice,
the answer, the cache's store, and the bookkeeping every answered call leaves (the chunks a
restricted caller was shown, the latency and errors its configuration variant is judged
by, the SLO guard's watch of the call in flight).

The gRPC handlers (api/server.py) convert a request into QueryParams and a CallClock, call
one method here, and convert what it returns into the reply (citations' feedback receipts
and the query audit of the reply as sent included). Nothing here knows gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from services.inference.answer.modes import ModeChoice
from services.inference.answer.result import Answer
from services.inference.cache.key import scope_of
from services.inference.cache.serve import CachedQueries, Lookup, answer_events
from services.inference.engine import QueryEngine, Retrieval
from services.inference.errors import NoShardsError
from services.inference.guard.inflight import UNWATCHED, End, InFlight, Watch
from services.inference.query import QueryParams
from services.inference.search.served import ServedChunks
from shared.batching.queue import QueueFullError

# The share of a caller's remaining deadline the gather may use; the rest is for the
# answer step and the reply, so a slow shard costs a partial answer, not a timeout.
GATHER_SHARE = 0.75
# (method, seconds, variant, config version, failed): a failed call is one that found no
# shards or no queue room, counted against its variant by the SLO guard.
LatencySink = Callable[[str, float, str, int, bool], None]


class CallClock(Protocol):
    """The time of one call, as its transport knows it."""

    started: float  # time.perf_counter() at the call's start

    def remaining(self) -> float | None:
        """Seconds left of the transport's own deadline (None: none)."""

    def left(self) -> float | None:
        """Seconds left of the earlier of the request's deadline and the transport's."""


@dataclass(frozen=True)
class Answered:
    retrieval: Retrieval
    choice: ModeChoice
    answer: Answer


@dataclass
class StreamedCall:
    """A streamed answer under way: its retrieval and path are known (the reply's start),
    `events()` yields its text deltas and then the Answer; `end(how)` closes its watch."""

    retrieval: Retrieval
    choice: ModeChoice
    events: Callable[[], AsyncIterator[str | Answer]]
    watch: Watch = field(default=UNWATCHED)

    def end(self, how: End | None) -> None:
        self.watch.end(how)


class QueryPipeline:
    def __init__(self, engine: QueryEngine, cache: CachedQueries,
                 latency_sink: LatencySink | None = None,
                 inflight: InFlight | None = None) -> None:
        self.engine, self.cache = engine, cache
        self.metrics = engine.metrics
        self.latency_sink = latency_sink
        self.inflight = inflight  # the SLO guard's view of routed calls (guard/inflight.py)
        # Chunks shown to restricted callers: what their feedback may name (search/served.py).
        self.served = ServedChunks(engine.settings.feedback_served_capacity)

    async def query(self, params: QueryParams, clock: CallClock) -> Answered:
        """Query: the answer, from the cache where it holds a current one."""
        async with self._watched("Query", clock.started, params):
            found = await self.search(params, self._budget(clock), "query")
            if found.choice is not None and found.answer is not None:
                choice, answer = found.choice, found.answer
            else:
                await self.engine.ready_generator(found.retrieval.params)
                choice = self._choose(found.retrieval.params, clock)
                answer = await self.engine.answer(found.retrieval, choice)
                self.cache.store_answer(found, choice, answer)
        self._shown(found.retrieval)
        self._finished("Query", clock.started, found.outcome, found.retrieval.params)
        return Answered(found.retrieval, choice, answer)

    async def retrieve(self, params: QueryParams, clock: CallClock) -> Retrieval:
        """Retrieve: the ranked chunks alone, no answer."""
        async with self._watched("Retrieve", clock.started, params):
            found = await self.search(params, self._budget(clock), "retrieve")
        self._shown(found.retrieval)
        self._finished("Retrieve", clock.started, found.outcome, params)
        return found.retrieval

    async def stream(self, params: QueryParams, clock: CallClock) -> StreamedCall:
        """StreamQuery: the retrieval and the path chosen now, the answer as it is made.
        The guard watches the call until the caller ends it (StreamedCall.end)."""
        async with self._watched("StreamQuery", clock.started, params, ends=False) as watch:
            found = await self.search(params, self._budget(clock), "query")
            if found.answer is not None and found.choice is not None:
                choice = found.choice
            else:
                await self.engine.ready_generator(found.retrieval.params)
                choice = self._choose(found.retrieval.params, clock)
        self._shown(found.retrieval)

        async def events() -> AsyncIterator[str | Answer]:
            source = (answer_events(found.answer) if found.answer is not None
                      else self.engine.answer_stream(found.retrieval, choice))
            first, last = True, clock.started
            async for event in source:
                if isinstance(event, Answer):
                    if found.answer is None:
                        self.cache.store_answer(found, choice, event)
                    self._finished("StreamQuery", clock.started, found.outcome,
                                   found.retrieval.params)
                    watch.end("call")
                    yield event
                    return
                now = time.perf_counter()
                (self.metrics.ttft if first else self.metrics.inter_token).observe(now - last)
                first, last = False, now
                yield event

        return StreamedCall(found.retrieval, choice, events, watch)

    async def search(self, params: QueryParams, budget_s: float, call: str) -> Lookup:
        """The call's retrieval, and its answer when the answer cache holds a current one."""
        if call == "retrieve":
            return await self.cache.retrieve(params, budget_s)
        return await self.cache.query(params, budget_s)

    def finished(self, method: str, started: float) -> None:
        """A call outside the query path (Embed) timed as the query calls are."""
        self._finished(method, started)

    def _choose(self, params: QueryParams, clock: CallClock) -> ModeChoice:
        """The answer path, judged by the call's time left (the server's default deadline
        less its time so far, where the call set none)."""
        return self.engine.choose_mode(params, clock.left(), time.perf_counter() - clock.started)

    def _budget(self, clock: CallClock) -> float:
        budget = self.engine.settings.shard_timeout_s
        remaining = clock.remaining()
        return budget if remaining is None else min(budget, remaining * GATHER_SHARE)

    def _shown(self, retrieval: Retrieval) -> None:
        """Remember what a restricted caller was shown: the chunks its feedback may name."""
        access = retrieval.params.access
        if not access.all_access:
            self.served.record(scope_of(access), (h.chunk_id for h in retrieval.result.hits))

    def _finished(self, method: str, started: float, cache_outcome: str = "",
                  params: QueryParams | None = None) -> None:
        seconds = time.perf_counter() - started
        self.metrics.latency.labels(method=method).observe(seconds)
        served = None if params is None else params.served
        if served is not None:
            self.metrics.variant_latency.labels(method=method,
                                                variant=served.variant).observe(seconds)
        if cache_outcome:
            self.metrics.answer_cache_latency.labels(method=method,
                                                     outcome=cache_outcome).observe(seconds)
        if self.latency_sink is not None:
            self.latency_sink(method, seconds, served.variant if served else "",
                              served.version if served else 0, False)

    @contextlib.asynccontextmanager
    async def _watched(self, method: str, started: float, params: QueryParams,
                       ends: bool = True) -> AsyncIterator[Watch]:
        """A call that finds no shards or no queue room is its variant's error (the SLO
        guard's error rate), and so is one its caller cancelled or whose deadline passed
        (CancelledError here); a caller's mistake is not the variant's. The guard watches
        the call from here (`ends`: to its end; else the caller ends the Watch yielded)."""
        served = params.served
        watch = (self.inflight.begin(served.variant, served.version)
                 if self.inflight is not None and served is not None else UNWATCHED)
        try:
            yield watch
        except (NoShardsError, QueueFullError):
            watch.end("error")
            if self.latency_sink is not None and served is not None:
                self.latency_sink(method, time.perf_counter() - started, served.variant,
                                  served.version, True)
            raise
        except (asyncio.CancelledError, GeneratorExit):
            watch.end("cancelled")
            raise
        except BaseException:
            watch.end(None)
            raise
        if ends:
            watch.end("call")

