"""The API with principals: each call searches with its caller's Access, refusals are
UNAUTHENTICATED with a reason, feedback names only chunks the caller was shown, and Stats
is for all-access callers only."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from shared.contract.access import Access
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.grpcurl import grpcurl_binary
from tests.support.tokens import AUDIENCE, SECRET, bearer, hs256
from tests.unit.inference.fakes import FakeSearch
from tests.unit.inference.serving import CHUNKS, SERVING, health, serving, stub

AUTH: dict[str, Any] = {"jwt_secret": SECRET, "jwt_audience": AUDIENCE, "auth_token": "s3rvice"}
SERVICE = (("authorization", "Bearer s3rvice"),)


def reason_of(err: grpc.aio.AioRpcError) -> str:
    return dict(err.trailing_metadata() or ()).get("streamrag-reason", "")


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value


def test_every_search_carries_the_callers_access() -> None:
    search = FakeSearch(CHUNKS)

    async def go() -> list[Access]:
        async with serving(search, **AUTH) as (_, channel):
            api = stub(channel)
            ann = bearer(hs256("ann", ["payments"]))
            await api.Retrieve(pb.RetrieveRequest(question="disk"), metadata=ann)
            await api.Query(pb.QueryRequest(question="lunch"), metadata=bearer(hs256("cy")))
            async for _ in api.StreamQuery(pb.QueryRequest(question="broker"),
                                           metadata=bearer(hs256("bob", ["hr"]))):
                pass
            await api.Retrieve(pb.RetrieveRequest(question="disk"), metadata=SERVICE)
        return [q.access for q, _ in search.queries]
    assert asyncio.run(go()) == [Access.of("ann", ["payments"]), Access.of("cy", []),
                                 Access.of("bob", ["hr"]), Access.everything()]


def test_without_auth_configured_every_search_reads_everything() -> None:
    search = FakeSearch(CHUNKS)

    async def go() -> None:
        async with serving(search) as (_, channel):
            await stub(channel).Retrieve(pb.RetrieveRequest(question="disk"),
                                         metadata=bearer("anything"))
    asyncio.run(go())
    assert [q.access for q, _ in search.queries] == [Access.everything()]


def test_refusals_say_why_count_it_and_leave_health_open() -> None:
    async def go() -> tuple[list[tuple[grpc.StatusCode, str, str]], float, int]:
        async with serving(FakeSearch(CHUNKS), **AUTH) as (runtime, channel):
            api = stub(channel)
            expired = hs256("ann", ["payments"], exp_in=-600)
            calls = [api.Retrieve(pb.RetrieveRequest(question="disk")),
                     api.Retrieve(pb.RetrieveRequest(question="disk"), metadata=bearer(expired)),
                     api.Query(pb.QueryRequest(question="disk"),
                               metadata=bearer(hs256("ann", aud="elsewhere"))),
                     api.Info(pb.InfoRequest(), metadata=bearer("s3rvice-not"))]
            errors = [await refused(c) for c in calls]
            failures = runtime.metrics.sample("streamrag_inference_auth_failures_total",
                                              {"reason": "expired"})
            seen = [(e.code(), reason_of(e), e.details()) for e in errors]
            assert all(expired not in d for _, _, d in seen)  # the token is never echoed
            return seen, failures, await health(channel)
    seen, failures, status = asyncio.run(go())
    assert [(code, reason) for code, reason, _ in seen] == [
        (grpc.StatusCode.UNAUTHENTICATED, "missing_token"),
        (grpc.StatusCode.UNAUTHENTICATED, "expired"),
        (grpc.StatusCode.UNAUTHENTICATED, "wrong_audience"),
        (grpc.StatusCode.UNAUTHENTICATED, "malformed_token")]
    assert "bearer token" in seen[0][2] and "expired" in seen[1][2]
    assert failures == 1.0 and status == SERVING


def test_stats_are_for_all_access_callers_only() -> None:
    async def go() -> tuple[grpc.aio.AioRpcError, grpc.aio.AioRpcError]:
        async with serving(FakeSearch(CHUNKS), **AUTH) as (_, channel):
            request = pb.StatsRequest(window=pb.STATS_WINDOW_MINUTE)
            user = await refused(stub(channel).Stats(request, metadata=bearer(hs256("ann"))))
            service = await refused(stub(channel).Stats(request, metadata=SERVICE))
            return user, service
    user, service = asyncio.run(go())
    assert user.code() == grpc.StatusCode.PERMISSION_DENIED
    assert reason_of(user) == "needs_all_access"
    # The service account passes the check (this runtime just has no statistics).
    assert service.code() == grpc.StatusCode.UNAVAILABLE


def test_feedback_names_only_chunks_the_caller_was_shown() -> None:
    sent: list[tuple[str, str]] = []

    async def sink(chunk_id: str, kind: str, variant: str, config_version: int) -> None:
        sent.append((chunk_id, kind))

    async def go() -> list[grpc.aio.AioRpcError]:
        async with serving(FakeSearch(CHUNKS), runtime_kw={"feedback_sink": sink},
                           **AUTH) as (_, channel):
            api = stub(channel)
            ann, bob = bearer(hs256("ann", ["payments"])), bearer(hs256("bob", ["hr"]))

            def click(chunk: str, who: Any) -> Any:
                return api.Feedback(pb.FeedbackRequest(
                    chunk_id=chunk, kind=pb.FEEDBACK_KIND_CLICK), metadata=who)
            errors = [await refused(click("c-disk", ann)),  # exists, not shown yet
                      await refused(click("no-such-chunk", ann))]  # does not exist
            shown = await api.Retrieve(pb.RetrieveRequest(question="disk", top_k=1),
                                       metadata=ann)
            assert [c.chunk_id for c in shown.chunks] == ["c-disk"]
            assert (await click("c-disk", ann)).accepted
            errors.append(await refused(click("c-disk", bob)))  # shown to ann, not bob
            assert (await click("c-lunch", SERVICE)).accepted  # all access: any chunk
            return errors
    errors = asyncio.run(go())
    assert sent == [("c-disk", "click"), ("c-lunch", "click")]
    assert {(e.code(), reason_of(e), e.details()) for e in errors} == {
        (grpc.StatusCode.NOT_FOUND, "unknown_chunk", "no such chunk_id (unknown_chunk): "
         "no chunk by that id was recently shown to this caller")}  # all three alike


def test_a_receipt_carries_feedback_to_another_replica_for_its_caller_only() -> None:
    """Two instances sharing the feedback key: a chunk shown by one is clicked on the
    other with its receipt; without it, with another caller's, or forged: NOT_FOUND."""
    sent: list[str] = []

    async def sink(chunk_id: str, kind: str, variant: str, config_version: int) -> None:
        sent.append(chunk_id)

    def replica() -> Any:
        return serving(FakeSearch(CHUNKS), runtime_kw={"feedback_sink": sink},
                       feedback_key="f" * 32, **AUTH)

    async def go() -> tuple[list[Any], list[grpc.aio.AioRpcError]]:
        async with replica() as (_, to_a), replica() as (_, to_b):
            ann, bob = bearer(hs256("ann", ["payments"])), bearer(hs256("bob", ["hr"]))
            answer = await stub(to_a).Query(pb.QueryRequest(question="disk", top_k=1),
                                            metadata=ann)
            [cited] = answer.citations
            shown = await stub(to_a).Retrieve(pb.RetrieveRequest(question="disk", top_k=1),
                                              metadata=ann)

            def click(receipt: str, who: Any) -> Any:
                return stub(to_b).Feedback(pb.FeedbackRequest(
                    chunk_id=cited.chunk_id, kind=pb.FEEDBACK_KIND_CLICK,
                    receipt=receipt), metadata=who)
            accepted = [await click(cited.feedback_receipt, ann),
                        await click(shown.chunks[0].feedback_receipt, ann)]
            refusals = [await refused(click("", ann)),  # b never showed it
                        await refused(click(cited.feedback_receipt, bob)),
                        await refused(click("v1.99999999999.AAAA", ann))]
            return accepted, refusals
    accepted, refusals = asyncio.run(go())
    assert all(r.accepted for r in accepted) and sent == ["c-disk", "c-disk"]
    assert {(e.code(), reason_of(e)) for e in refusals} == {
        (grpc.StatusCode.NOT_FOUND, "unknown_chunk")}


def test_two_authorization_headers_are_refused_in_either_order() -> None:
    """gRPC delivers both headers; reading one (the last, as a dict does) would make
    'service then carol' carol and 'carol then service' the service account."""
    carol = ("authorization", f"Bearer {hs256('carol', ['hr'])}")

    async def go() -> list[tuple[grpc.StatusCode, str]]:
        async with serving(FakeSearch(CHUNKS), **AUTH) as (_, channel):
            api = stub(channel)
            out = []
            for metadata in ((SERVICE[0], carol), (carol, SERVICE[0])):
                err = await refused(api.Retrieve(pb.RetrieveRequest(question="disk"),
                                                 metadata=metadata))
                out.append((err.code(), reason_of(err)))
            return out
    assert asyncio.run(go()) == [(grpc.StatusCode.UNAUTHENTICATED, "ambiguous_token")] * 2


def test_an_oversized_token_is_unauthenticated_with_its_reason_not_internal() -> None:
    """A 70 KB token passes gRPC's metadata limit (raised to max_metadata_bytes) and is
    refused by the authenticator; past that limit gRPC itself refuses it, as
    RESOURCE_EXHAUSTED saying so."""
    async def go() -> list[tuple[grpc.StatusCode, str, str]]:
        async with serving(FakeSearch(CHUNKS), **AUTH) as (_, channel):
            api = stub(channel)
            out = []
            for size in (70_000, 200_000):
                err = await refused(api.Retrieve(pb.RetrieveRequest(question="disk"),
                                                 metadata=bearer("a" * size)))
                out.append((err.code(), reason_of(err), err.details() or ""))
            return out
    (code, reason, _), (past_code, _, past_details) = asyncio.run(go())
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "token_too_large")
    assert past_code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "metadata size exceeds" in past_details


def test_grpcurl_is_told_unauthenticated_for_an_oversized_token() -> None:
    """Go clients check the server's advertised header-list limit themselves: with gRPC's
    16 KiB they failed INTERNAL before sending; now the server reads it and says why."""
    binary = grpcurl_binary()

    async def go() -> tuple[int, str]:
        async with serving(FakeSearch(CHUNKS), **AUTH) as (runtime, _):
            proc = await asyncio.create_subprocess_exec(
                str(binary), "-plaintext", "-max-time", "20",
                "-H", "authorization: Bearer " + "a" * 70_000,
                "-d", '{"question": "disk"}', f"127.0.0.1:{runtime.port}",
                "streamrag.v1.Inference/Retrieve",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            _, err = await proc.communicate()
            return proc.returncode or 0, err.decode()
    code, err = asyncio.run(go())
    assert code != 0 and "Unauthenticated" in err and "token_too_large" in err, err
    assert "Internal" not in err
