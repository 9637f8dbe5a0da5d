"""The HTTP/JSON face in process over fakes, beside the gRPC face of the same runtime: the
same replies, the same refusals (as HTTP statuses with the same reasons), the same callers'
access, a stream as server-sent events, and an OpenAPI document that matches the routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from google.protobuf import json_format

from services.cli.mesh import free_port
from services.inference.api.routes import routes
from shared.contract.access import Access
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.tokens import AUDIENCE, SECRET, hs256
from tests.unit.inference.fakes import FakeSearch, GatedEncoder
from tests.unit.inference.serving import CHUNKS, serving, stub, without_receipts

AUTH: dict[str, Any] = {"jwt_secret": SECRET, "jwt_audience": AUDIENCE, "auth_token": "s3rvice"}
QUESTION = "What freed the broker disk?"


@asynccontextmanager
async def both_faces(search: FakeSearch, **kw: Any) -> AsyncIterator[
        tuple[Any, aiohttp.ClientSession, str]]:
    """A runtime serving gRPC and HTTP: (gRPC channel, HTTP session, HTTP base URL)."""
    async with (serving(search, http_port=free_port(), **kw) as (runtime, channel),
                aiohttp.ClientSession() as session):
        yield channel, session, f"http://127.0.0.1:{runtime.http_port}"


async def post(session: aiohttp.ClientSession, url: str, body: Any = None,
               token: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
    async with session.post(url, data=data, headers=headers) as response:
        return response.status, await response.json()


async def events(session: aiohttp.ClientSession, url: str, body: Any,
                 ) -> list[tuple[str, Any]]:
    async with session.post(url, json=body) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        text = await response.text()
    found = []
    for block in filter(None, text.split("\n\n")):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        found.append((lines["event"], json.loads(lines["data"])))
    return found


def citations(body: list[dict[str, Any]]) -> list[pb.Citation]:
    return without_receipts([json_format.ParseDict(c, pb.Citation()) for c in body])


def test_retrieve_and_query_over_http_answer_as_grpc_does() -> None:
    async def go() -> None:
        async with both_faces(FakeSearch(CHUNKS)) as (channel, session, base):
            request = {"question": QUESTION, "top_k": 2}
            status, retrieved = await post(session, f"{base}/v1/retrieve", request)
            by_grpc = await stub(channel).Retrieve(pb.RetrieveRequest(**request))
            assert status == 200
            assert citations(retrieved["chunks"]) == without_receipts(by_grpc.chunks)
            status, answered = await post(session, f"{base}/v1/query", request)
            query = await stub(channel).Query(pb.QueryRequest(**request))
            assert status == 200 and answered["answer"] == query.answer
            assert citations(answered["citations"]) == without_receipts(query.citations)
            assert answered["answer_mode"] == "extractive" and answered["partial"] is False
    asyncio.run(go())


def test_stream_query_sends_start_deltas_end_whose_text_is_the_answer() -> None:
    async def go() -> None:
        async with both_faces(FakeSearch(CHUNKS)) as (channel, session, base):
            request = {"question": QUESTION, "top_k": 3}
            found = await events(session, f"{base}/v1/query:stream", request)
            query = await stub(channel).Query(pb.QueryRequest(**request))
        kinds = [kind for kind, _ in found]
        assert kinds[0] == "start" and kinds[-1] == "end" and set(kinds[1:-1]) == {"delta"}
        assert "".join(data["delta"] for _, data in found[1:-1]) == query.answer
        assert citations(found[0][1]["start"]["citations"]) == without_receipts(
            query.citations)
        assert found[-1][1]["end"]["cited_chunk_ids"] == list(query.cited_chunk_ids)
    asyncio.run(go())


@pytest.mark.parametrize(("body", "reason", "field"), [
    (b"{", "bad_json", "body"),
    ({"question": QUESTION, "top_k": "two"}, "wrong_type", "top_k"),
    ({"question": QUESTION, "topp_k": 2}, "unknown_field", "topp_k"),
    ({"question": QUESTION, "top_k": 51}, "top_k_out_of_range", "top_k"),  # the servicer's
    ({"question": ""}, "empty_question", "question"),
    ({"question": QUESTION, "since": "last tuesday"}, "bad_time", "since"),
])
def test_a_bad_request_is_400_naming_the_field_as_grpc_would(
        body: Any, reason: str, field: str) -> None:
    async def go() -> tuple[int, Any, str, str]:
        async with both_faces(FakeSearch(CHUNKS)) as (channel, session, base):
            status, reply = await post(session, f"{base}/v1/retrieve", body)
            if isinstance(body, bytes) or reason in ("wrong_type", "unknown_field"):
                return status, reply, reason, field  # nothing gRPC could be sent
            try:
                await stub(channel).Retrieve(pb.RetrieveRequest(**body))
            except Exception as exc:
                meta = dict(exc.trailing_metadata())  # type: ignore[attr-defined]
                return status, reply, meta["streamrag-reason"], meta["streamrag-field"]
            raise AssertionError("gRPC accepted what HTTP refused")
    status, reply, grpc_reason, grpc_field = asyncio.run(go())
    assert status == 400 and reply["error"]["status"] == "INVALID_ARGUMENT"
    assert (reply["error"]["reason"], reply["error"]["field"]) == (grpc_reason, grpc_field)
    assert (reply["error"]["reason"], reply["error"]["field"]) == (reason, field)


def test_a_passed_deadline_is_504() -> None:
    encoder = GatedEncoder()  # held until the call has failed: its question is not encoded

    async def go() -> tuple[int, Any]:
        async with (serving(FakeSearch(CHUNKS), lambda: encoder,
                            http_port=free_port()) as (runtime, _),
                    aiohttp.ClientSession() as session):
            url = f"http://127.0.0.1:{runtime.http_port}/v1/retrieve"
            try:
                return await post(session, url, {"question": QUESTION, "deadline_ms": 50})
            finally:
                encoder.gate.set()
    status, reply = asyncio.run(go())
    assert (status, reply["error"]["status"]) == (504, "DEADLINE_EXCEEDED")
    assert reply["error"]["message"] == "deadline_ms 50 passed"


def test_callers_are_verified_as_by_grpc_and_search_with_their_access() -> None:
    search = FakeSearch(CHUNKS)

    async def go() -> dict[str, tuple[int, Any]]:
        async with both_faces(search, **AUTH) as (_, session, base):
            url, ask = f"{base}/v1/retrieve", {"question": QUESTION}
            return {
                "none": await post(session, url, ask),
                "wrong": await post(session, url, ask, "not-the-token"),
                "expired": await post(session, url, ask, hs256("ann", exp_in=-600)),
                "ann": await post(session, url, ask, hs256("ann", ["payments"])),
                "service": await post(session, url, ask, "s3rvice"),
                "ann_stats": await post(session, f"{base}/v1/stats",
                                        {"window": "STATS_WINDOW_MINUTE"},
                                        hs256("ann", ["payments"])),
            }
    replies = asyncio.run(go())
    for name, reason in (("none", "missing_token"), ("wrong", "malformed_token"),
                         ("expired", "expired")):
        status, body = replies[name]
        assert (status, body["error"]["reason"]) == (401, reason), name
    assert replies["ann"][0] == replies["service"][0] == 200
    status, body = replies["ann_stats"]
    assert (status, body["error"]["reason"]) == (403, "needs_all_access")
    assert [q.access for q, _ in search.queries] == [Access.of("ann", ["payments"]),
                                                     Access.everything()]


def test_two_authorization_headers_are_refused() -> None:
    async def go() -> tuple[int, Any]:
        async with both_faces(FakeSearch(CHUNKS), **AUTH) as (_, session, base):
            headers = [("Authorization", "Bearer s3rvice"),
                       ("Authorization", f"Bearer {hs256('ann')}")]
            async with session.post(f"{base}/v1/info", headers=headers) as response:
                return response.status, await response.json()
    status, body = asyncio.run(go())
    assert (status, body["error"]["reason"]) == (401, "ambiguous_token")


def test_info_takes_an_empty_body() -> None:
    async def go() -> tuple[pb.InfoResponse, tuple[int, Any]]:
        async with both_faces(FakeSearch(CHUNKS)) as (channel, session, base):
            return (await stub(channel).Info(pb.InfoRequest()),
                    await post(session, f"{base}/v1/info", b""))
    info, (status, body) = asyncio.run(go())
    assert status == 200 and body["model_id"] == info.model_id and body["dim"] == info.dim
    assert body["limits"]["max_top_k"] == info.limits.max_top_k


def test_the_openapi_document_names_every_route_with_the_protos_fields() -> None:
    async def go() -> tuple[dict[str, Any], dict[str, int]]:
        async with both_faces(FakeSearch(CHUNKS)) as (_, session, base):
            async with session.get(f"{base}/openapi.json") as response:
                document = await response.json()
            statuses = {}
            for path in document["paths"]:  # each exists: not 404, not 405
                async with session.post(f"{base}{path}", data=b"[]") as response:
                    statuses[path] = response.status
        return document, statuses
    document, statuses = asyncio.run(go())
    assert statuses == {r.path: 400 for r in routes()}  # not_an_object, from each handler
    schemas = document["components"]["schemas"]
    for route in routes():
        operation = document["paths"][route.path]["post"]
        assert operation["operationId"] == route.method
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = schemas[ref.rsplit("/", 1)[1]]
        assert list(schema["properties"]) == [f.name for f in route.request.DESCRIPTOR.fields]
    assert schemas["QueryRequest"]["properties"]["stop"] == {"type": "array",
                                                             "items": {"type": "string"}}
    assert schemas["StatsRequest"]["properties"]["window"] == {
        "$ref": "#/components/schemas/StatsWindow"}
    assert schemas["StatsWindow"]["enum"][1] == "STATS_WINDOW_MINUTE"
    assert schemas["QueryResponse"]["properties"]["config_version"]["type"] == "string"
