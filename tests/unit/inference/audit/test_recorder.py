"""The handlers record one audit per answered call (none for a refused one), off the
answer path; the agent signs them with inference's query key."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import grpc
import pytest

from services.inference.audit.agents import signed
from services.inference.audit.recorder import DROPPED, AuditRecorder, recorder
from services.inference.audit.settings import QueryAuditSettings
from shared.contract.access import Access
from shared.contract.audit_signing import DEV_QUERY_SIGNER, recover
from shared.contract.codec import encode
from shared.contract.query_audit import principal_hash
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.polling import eventually_async
from tests.support.tokens import AUDIENCE, SECRET, bearer, hs256
from tests.unit.inference.fakes import FakeSearch
from tests.unit.inference.serving import CHUNKS, serving, stub


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_each_answered_call_is_recorded_once_and_a_refused_one_not_at_all() -> None:
    recorder().drain()

    async def go() -> tuple[pb.QueryResponse, list[pb.StreamQueryResponse],
                            pb.RetrieveResponse]:
        async with serving(FakeSearch(CHUNKS), answer_sentences=2) as (_, channel):
            answer = await stub(channel).Query(pb.QueryRequest(question="What freed the disk?"))
            streamed = [m async for m in stub(channel).StreamQuery(
                pb.QueryRequest(question="Who ordered lunch?"))]
            retrieved = await stub(channel).Retrieve(pb.RetrieveRequest(question="broker logs"))
            with pytest.raises(grpc.aio.AioRpcError):
                await stub(channel).Query(pb.QueryRequest(question="q", top_k=-1))
        return answer, streamed, retrieved

    answer, streamed, retrieved = asyncio.run(go())
    audits = recorder().drain()
    assert [(a.method, a.question_sha256) for a in audits] == [
        ("Query", sha("What freed the disk?")), ("StreamQuery", sha("Who ordered lunch?")),
        ("Retrieve", sha("broker logs"))]
    query, stream, retrieve = audits
    assert list(query.shown) == [c.chunk_id for c in answer.citations]
    assert list(query.docs) == [f"{c.doc_id}@v{c.version}" for c in answer.citations]
    assert list(query.cited) == list(answer.cited_chunk_ids) and query.cited
    assert query.answer_mode == answer.answer_mode == "extractive"
    start, end = streamed[0].start, streamed[-1].end
    assert list(stream.shown) == [c.chunk_id for c in start.citations]
    assert list(stream.cited) == list(end.cited_chunk_ids)
    assert query.finished and stream.finished and retrieve.finished
    assert list(retrieve.shown) == [c.chunk_id for c in retrieved.chunks]
    assert (retrieve.cited, retrieve.answer_mode) == ((), "")
    assert len({a.query_id for a in audits}) == 3


def test_a_full_buffer_drops_the_oldest_and_counts_it() -> None:
    class Reply:
        citations = ()
        cited_chunk_ids = ()
        answer_mode, variant, config_version = "extractive", "", 0

    small = AuditRecorder(QueryAuditSettings(audit_buffer_max=2), now=lambda: 1.0,
                          caller=lambda: ("bob", "user", Access.of("bob", ["eng"])))
    before = DROPPED._value.get()
    for question in ("one", "two", "three"):
        small.answered("Query", question, Reply())
    assert [a.question_sha256 for a in small.drain()] == [sha("two"), sha("three")]
    assert DROPPED._value.get() == before + 1
    assert small.drain() == []


def test_the_agent_signs_with_the_query_key() -> None:
    open_caller = ("", "open", Access.everything())
    record = AuditRecorder(QueryAuditSettings(), caller=lambda: open_caller
                           ).record("Query", "q", (), (), "extractive")
    (done,) = signed([record])
    assert done.signer == DEV_QUERY_SIGNER and recover(done) == DEV_QUERY_SIGNER
    assert (done.principal, done.principal_kind, done.scope) == ("", "open", "*")


def test_a_user_is_recorded_by_the_hmac_of_its_subject_and_a_refused_call_not_at_all(
) -> None:
    recorder().drain()
    subject = "alice@example.com"

    async def go() -> None:
        async with serving(FakeSearch(CHUNKS), jwt_secret=SECRET, jwt_audience=AUDIENCE) as (
                _, channel):
            await stub(channel).Query(pb.QueryRequest(question="What freed the disk?"),
                                      metadata=bearer(hs256(subject, ["eng"])))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub(channel).Query(pb.QueryRequest(question="What freed the disk?"))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED

    asyncio.run(go())
    (audit,) = recorder().drain()
    key = recorder().principal_key
    expected = principal_hash(subject, key)
    assert (audit.principal, audit.principal_kind) == (expected, "user")
    assert audit.scope == ",".join(sorted(["eng", "public", "user:" + expected]))
    assert subject.encode() not in encode(audit)


def test_a_stream_cut_off_after_its_citations_is_recorded_unfinished() -> None:
    """The caller saw the citations: that is recorded, with nothing cited (the answer never
    ended) and finished False."""
    recorder().drain()

    async def stalls(*_: object, **__: object) -> AsyncIterator[str]:
        yield "Rotating"
        await asyncio.Event().wait()  # the answer never ends

    async def go() -> list[str]:
        async with serving(FakeSearch(CHUNKS)) as (runtime, channel):
            runtime.engine.answer_stream = stalls
            call = stub(channel).StreamQuery(pb.QueryRequest(question="What freed the disk?"))
            start = await call.read()
            await call.read()  # the first delta
            call.cancel()
            await eventually_async(lambda: recorder().items, "the cut-off stream's audit")
            return [c.chunk_id for c in start.start.citations]

    shown = asyncio.run(go())
    (audit,) = recorder().drain()
    assert (audit.method, audit.finished, audit.cited) == ("StreamQuery", False, ())
    assert list(audit.shown) == shown and shown
