"""No response tells one caller what another asked.

Two worlds per example: in one the observer asks alone; in the other a second caller
(another scope) asks its own questions, some of them the observer's, between the
observer's calls. The observer's replies must be the same bytes in both, timings included.
Time is virtual there: it passes only while the encoder encodes (about 1 ms a text) and
the shards search (about 2 ms), so a vector or an answer the other caller left in a shared cache
shows as a smaller embed_ms, answer_ms or total_ms, exactly as it would on a real clock.
The in-process servicer runs over fakes: a labelled corpus whose search filters by the
caller's access, as the shards do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from services.inference import engine as engine_module
from services.inference.answer import extractor
from services.inference.api import convert, server
from services.inference.api.principal import SERVICE, USER, Principal, bound
from services.inference.api.server import InferenceServicer
from services.inference.cache import serve
from services.inference.cache.serve import CachedQueries
from services.inference.engine import QueryEngine
from services.inference.search.gather import GatherResult
from services.inference.search.scatter import SearchQuery
from services.inference.settings import InferenceSettings
from shared.contract.access import Access
from shared.contract.records import SearchHit
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import WordEncoder

WALL = 1_750_000_000.0  # the wall clock of both worlds (receipts' expiry, relative windows)
# Costs in virtual seconds, powers of two: every sum and difference of them is exact, so two
# worlds that did the same work time it to the same bit.
TEXT_S, SEARCH_S = 2.0 ** -10, 2.0 ** -9
EMBED_MS = TEXT_S * 1000  # one question encoded
CORPUS = [  # chunk id, acl, text
    ("pay-1", ("payments",), "The refund batch failed twice. Forty transfers were retried."),
    ("pay-2", ("payments",), "The ledger reconciliation found a duplicate refund. It was fixed."),
    ("hr-1", ("hr",), "The leave claim was unpaid. The people team paid it on Monday."),
    ("pub-1", ("public",), "The reconciliation calendar is published. Every team reads it."),
    ("pub-2", ("public",), "The broker disk filled up. Rotating the logs freed it."),
]
QUESTIONS = ["why did the refund batch fail", "what did the reconciliation find",
             "when was the leave claim paid", "what freed the broker disk",
             "is the calendar published"]
PRINCIPALS = {
    "ann": Principal("ann", USER, Access.of("ann", ["payments"])),
    "eve": Principal("eve", USER, Access.of("eve", ["payments"])),  # ann's groups, not ann
    "bob": Principal("bob", USER, Access.of("bob", ["hr"])),
    "cy": Principal("cy", USER, Access.of("cy", ["payments", "hr"])),
    "dee": Principal("dee", USER, Access.of("dee", [])),
    "service": Principal("service", SERVICE, Access.everything()),
}


class Clock:
    """perf_counter that moves only when work is done; time() fixed."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return WALL

    def monotonic(self) -> float:
        return self.now


class TimedEncoder(WordEncoder):
    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.clock.now += TEXT_S * len(texts)
        return super().encode(texts)


class LabelledSearch:
    """The corpus searched as the shards would: readable chunks only, by cosine."""

    ready, partitions = True, 1

    def __init__(self, clock: Clock) -> None:
        self.clock, self.encoder = clock, WordEncoder()
        self.vectors = self.encoder.encode([text for _, _, text in CORPUS])

    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult:
        self.clock.now += SEARCH_S
        scores = self.vectors @ query.vector
        hits = [SearchHit(chunk_id=cid, doc_id=f"doc-{cid}", version=1,
                          score=round(float(scores[i]), 6), event_time=WALL - 3600,
                          text=text, title="t", domain="d", source="s")
                for i, (cid, acl, text) in enumerate(CORPUS) if query.access.admits(acl)]
        hits.sort(key=lambda h: (-h.score, h.chunk_id))
        # A generation that never changes: an unchanged index, so stored answers are hits.
        return GatherResult(tuple(hits[:query.top_k]), (0,), (), generation=1)


class Context:
    def time_remaining(self) -> float | None:
        return None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"


@dataclass(frozen=True)
class Call:
    who: str
    method: str  # Query | StreamQuery | Retrieve
    question: str


@contextlib.contextmanager
def virtual_time(clock: Clock) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for module in (engine_module, convert, server, serve, extractor):
            stack.enter_context(patch.object(module, "time", clock))
        yield


async def replies(calls: Sequence[Call]) -> list[bytes]:
    """Each call's reply (every message of a stream), serialised, in one fresh world."""
    clock = Clock()
    with virtual_time(clock):
        s = InferenceSettings(feedback_key="cross-caller-feedback-receipt-key-0123456789")
        engine = QueryEngine(s, LabelledSearch(clock), TimedEncoder(clock))
        engine.start()
        try:
            servicer = InferenceServicer(engine, cache=CachedQueries(engine, lambda: 1))
            servicer.receipts.clock = clock.time
            return [await _reply(servicer, call) for call in calls]
        finally:
            await engine.stop()


async def _reply(servicer: InferenceServicer, call: Call) -> bytes:
    with bound(PRINCIPALS[call.who]):
        if call.method == "Retrieve":
            sent: list[Any] = [await servicer.Retrieve(
                pb.RetrieveRequest(question=call.question, top_k=3), Context())]
        elif call.method == "Query":
            sent = [await servicer.Query(pb.QueryRequest(
                question=call.question, top_k=3, answer_mode="extractive"), Context())]
        else:
            sent = [m async for m in servicer.StreamQuery(pb.QueryRequest(
                question=call.question, top_k=3, answer_mode="extractive"), Context())]
    return b"|".join(m.SerializeToString(deterministic=True) for m in sent)


methods = st.sampled_from(["Query", "StreamQuery", "Retrieve"])
questions = st.sampled_from(QUESTIONS)
asks = st.lists(st.tuples(methods, questions), max_size=3)


@settings(max_examples=40, deadline=None)
@given(pair=st.lists(st.sampled_from(sorted(PRINCIPALS)), min_size=2, max_size=2,
                     unique=True),
       observed=st.lists(st.tuples(methods, questions, asks), min_size=1, max_size=5))
def test_a_callers_replies_do_not_depend_on_what_another_asked(
        pair: list[str], observed: list[tuple[str, str, list[tuple[str, str]]]]) -> None:
    me, other = pair
    mine = [Call(me, method, q) for method, q, _ in observed]
    mixed: list[Call] = []
    for call, (_, _, before) in zip(mine, observed, strict=True):
        mixed += [Call(other, method, q) for method, q in before] + [call]
    alone = asyncio.run(replies(mine))
    together = asyncio.run(replies(mixed))
    assert [r for c, r in zip(mixed, together, strict=True) if c.who == me] == alone


def test_the_same_question_from_another_scope_is_encoded_and_timed_afresh() -> None:
    """The issue's case: carol asked, then dave asks the very same question. Dave's reply
    carries the full embed time (one text's encoding), as if carol never had."""
    question = QUESTIONS[0]
    first, second = asyncio.run(replies([Call("ann", "Query", question),
                                         Call("bob", "Query", question)]))
    alone = asyncio.run(replies([Call("bob", "Query", question)]))[0]
    timings = pb.QueryResponse.FromString(second).timings
    assert timings.embed_ms == EMBED_MS and second == alone
    assert pb.QueryResponse.FromString(first).timings.embed_ms == EMBED_MS


def test_within_one_scope_the_caches_still_serve() -> None:
    """The same caller again: its own answer is served from the cache (no time spent), so
    the scoping took nothing from a caller's repeated questions."""
    question = QUESTIONS[1]
    first, again = asyncio.run(replies([Call("cy", "Query", question),
                                        Call("cy", "Query", question)]))
    a, b = pb.QueryResponse.FromString(first), pb.QueryResponse.FromString(again)
    assert a.timings.embed_ms == EMBED_MS and a.timings.answer_ms > 0
    assert (b.timings.embed_ms, b.timings.answer_ms, b.timings.total_ms) == (0.0, 0.0, 0.0)
    assert b.answer == a.answer
