"""No call ends in UNKNOWN: odd stored values render empty; unexpected errors are INTERNAL."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from services.inference.api.status import DeadlineError, status_of
from services.inference.errors import NoGeneratorError
from services.inference.search.gather import GatherResult
from services.inference.search.scatter import SearchQuery
from shared.errors import InfrastructureError, InvalidInput
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch, hit
from tests.unit.inference.serving import CHUNKS, serving, stub

ODD = hit("c-odd", 0.95, "Disk usage on the broker was logged at an odd time.",
          doc_id="odd-doc").model_copy(update={"event_time": 1e16})
UNRENDERABLE = "streamrag_inference_unrenderable_total"
FAILURES = "streamrag_inference_failures_total"


def test_a_hit_with_an_event_time_out_of_range_is_cited_with_it_empty_and_counted() -> None:
    async def go() -> tuple[pb.QueryResponse, list[pb.StreamQueryResponse], list[float]]:
        search = FakeSearch({**CHUNKS, 3: [ODD]})
        async with serving(search) as (runtime, channel):
            def count() -> float:
                return runtime.metrics.sample(UNRENDERABLE, {"field": "event_time"})
            counts = [count()]
            unary = await stub(channel).Query(pb.QueryRequest(question="broker disk usage"))
            counts.append(count())
            stream = [m async for m in stub(channel).StreamQuery(
                pb.QueryRequest(question="broker disk usage"))]
            counts.append(count())
            return unary, stream, counts
    unary, stream, counts = asyncio.run(go())
    assert counts == [0, 1, 2]  # exactly one per answer that retrieved it
    for citations in (unary.citations, stream[0].start.citations):
        odd = {c.chunk_id: c for c in citations}["c-odd"]
        assert (odd.doc_id, odd.event_time_iso, odd.event_time) == ("odd-doc", "", 1e16)
        others = [c for c in citations if c.chunk_id != "c-odd"]
        assert len(others) == 3 and all(c.event_time_iso == "2023-11-14T22:13:20Z"
                                        for c in others)
    assert unary.answer and stream[-1].WhichOneof("event") == "end"


def test_text_that_is_not_unicode_is_cited_empty_and_the_answer_still_comes() -> None:
    bad = hit("c-bad", 0.99, "Broker disk \ud800 usage", doc_id="bad-doc")
    async def go() -> tuple[pb.QueryResponse, float]:
        async with serving(FakeSearch({**CHUNKS, 3: [bad]})) as (runtime, channel):
            response = await stub(channel).Query(pb.QueryRequest(question="broker disk"))
            return response, runtime.metrics.sample(UNRENDERABLE, {"field": "text"})
    response, count = asyncio.run(go())
    cited = {c.chunk_id: c.text for c in response.citations}
    assert cited["c-bad"] == "" and count == 1
    assert "Disk usage on the broker reached ninety percent." in response.answer


class Exploding(FakeSearch):
    """A search backend with a bug: it raises an exception carrying stored text."""

    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult:
        raise OverflowError("timestamp out of range for 'SECRET stored text'")


@pytest.mark.parametrize("streaming", [False, True], ids=["Query", "StreamQuery"])
def test_an_unexpected_error_is_internal_naming_its_type_but_not_its_message(
        streaming: bool) -> None:
    async def go() -> tuple[grpc.aio.AioRpcError, float]:
        async with serving(Exploding(CHUNKS)) as (runtime, channel):
            request = pb.QueryRequest(question="disk")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                if streaming:
                    [m async for m in stub(channel).StreamQuery(request)]
                else:
                    await stub(channel).Query(request)
            method = "StreamQuery" if streaming else "Query"
            labels = {"method": method, "reason": "internal_OverflowError"}
            return err.value, runtime.metrics.sample(FAILURES, labels)
    err, failures = asyncio.run(go())
    assert err.code() == grpc.StatusCode.INTERNAL
    assert err.details() == "internal error (OverflowError)"
    assert failures == 1


class FailingAfterCitations:
    """An encoder that encodes the question, then fails on the answer's sentences."""

    model_id, dim, device = "fake/words", 64, "cpu"

    def __init__(self) -> None:
        from tests.unit.inference.fakes import WordEncoder
        self.inner, self.calls = WordEncoder(), 0

    def encode(self, texts: Any) -> Any:
        self.calls += 1
        if self.calls > 1:
            raise ValueError("tokenizer choked on SECRET text")
        return self.inner.encode(texts)


def test_a_stream_failing_after_its_citations_ends_internal_not_unknown() -> None:
    async def go() -> tuple[list[pb.StreamQueryResponse], grpc.aio.AioRpcError]:
        got: list[pb.StreamQueryResponse] = []
        async with serving(FakeSearch(CHUNKS), FailingAfterCitations) as (_, channel):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                async for m in stub(channel).StreamQuery(pb.QueryRequest(question="disk")):
                    got.append(m)
            return got, err.value
    got, err = asyncio.run(go())
    assert [m.WhichOneof("event") for m in got] == ["start"]
    assert (err.code(), err.details()) == (grpc.StatusCode.INTERNAL,
                                           "internal error (ValueError)")


def test_the_mapping_of_every_kind_of_failure() -> None:
    cases = [
        (InvalidInput("bad_text", "texts", "blank"), grpc.StatusCode.INVALID_ARGUMENT,
         "invalid texts (bad_text): blank", "bad_text"),
        (InfrastructureError("warming up"), grpc.StatusCode.UNAVAILABLE, "warming up",
         "InfrastructureError"),
        (DeadlineError("deadline_ms 5 passed"), grpc.StatusCode.DEADLINE_EXCEEDED,
         "deadline_ms 5 passed", "deadline"),
        (KeyError("SECRET"), grpc.StatusCode.INTERNAL, "internal error (KeyError)",
         "internal_KeyError"),
        (NoGeneratorError("none loaded"), grpc.StatusCode.FAILED_PRECONDITION,
         "invalid answer_mode (no_generator): none loaded", "no_generator"),
    ]
    for exc, code, details, reason in cases:
        assert status_of(exc)[:3] == (code, details, reason)
