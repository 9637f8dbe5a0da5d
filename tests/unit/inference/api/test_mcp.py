"""The MCP face in process over fakes, with the SDK's own streamable HTTP client, beside the
gRPC face of the same runtime: the same chunks and answers, refusals as tool errors with
gRPC's reasons and fields, a caller's access applied, 401 without a valid token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from services.cli.mesh import free_port
from shared.contract.access import Access
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.tokens import AUDIENCE, SECRET, hs256
from tests.unit.inference.fakes import FakeSearch
from tests.unit.inference.serving import CHUNKS, serving, stub

SERVICE = "s3rvice"
AUTH: dict[str, Any] = {"jwt_secret": SECRET, "jwt_audience": AUDIENCE, "auth_token": SERVICE}
QUESTION = "What freed the broker disk?"


@asynccontextmanager
async def mcp_face(search: FakeSearch, **kw: Any) -> AsyncIterator[tuple[Any, str]]:
    """A runtime serving gRPC and MCP: (gRPC channel, MCP URL)."""
    async with serving(search, mcp_port=free_port(), **kw) as (runtime, channel):
        yield channel, f"http://127.0.0.1:{runtime.mcp_port}/mcp"


@asynccontextmanager
async def client(url: str, token: str = SERVICE) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http)) as session:
        yield session


def chunks(found: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(c["chunk_id"], c["doc_id"], c["text"]) for c in found]


def of(citations: Any) -> list[tuple[str, str, str]]:
    return [(c.chunk_id, c.doc_id, c.text) for c in citations]


def structured(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result.content
    return result.structured_content


def test_search_and_ask_return_what_grpc_returns() -> None:
    async def go() -> None:
        async with mcp_face(FakeSearch(CHUNKS), **AUTH) as (channel, url), \
                client(url) as mcp:
            names = {t.name for t in (await mcp.list_tools()).tools}
            assert names == {"search", "ask", "status"}
            found = await mcp.call_tool("search", {"question": QUESTION, "top_k": 2})
            meta = (("authorization", f"Bearer {SERVICE}"),)
            by_grpc = await stub(channel).Retrieve(
                pb.RetrieveRequest(question=QUESTION, top_k=2), metadata=meta)
            assert not found.is_error
            assert chunks(structured(found)["chunks"]) == of(by_grpc.chunks)
            assert structured(found)["chunks"][0]["doc_id"] == "incident-7"
            asked = await mcp.call_tool("ask", {"question": QUESTION, "top_k": 2})
            query = await stub(channel).Query(
                pb.QueryRequest(question=QUESTION, top_k=2), metadata=meta)
            answer = structured(asked)
            assert answer["answer"] == query.answer and query.answer
            assert chunks(answer["citations"]) == of(query.citations)
            assert answer["cited_chunk_ids"] == list(query.cited_chunk_ids)
            assert (answer["answer_mode"], answer["answer_mode_reason"]) == (
                query.answer_mode, query.answer_mode_reason)
            health = structured(await mcp.call_tool("status", {}))
            assert health["ready"] is True and health["max_top_k"] == 50
    asyncio.run(go())


@pytest.mark.parametrize(("arguments", "status", "reason", "field"), [
    ({"question": QUESTION, "top_k": -1}, "INVALID_ARGUMENT", "top_k_out_of_range", "top_k"),
    ({"question": ""}, "INVALID_ARGUMENT", "empty_question", "question"),
    ({"question": QUESTION, "since": "last tuesday"}, "INVALID_ARGUMENT", "bad_time", "since"),
])
def test_a_refusal_is_a_tool_error_with_grpcs_reason_and_field(
        arguments: dict[str, Any], status: str, reason: str, field: str) -> None:
    async def go() -> None:
        async with mcp_face(FakeSearch(CHUNKS)) as (_, url), client(url, "") as mcp:
            for tool in ("search", "ask"):
                result = await mcp.call_tool(tool, arguments)
                assert result.is_error
                error = structured(result)["error"]
                assert (error["status"], error["reason"], error["field"]) == (
                    status, reason, field)
                assert reason in result.content[0].text  # type: ignore[union-attr]
    asyncio.run(go())


def test_a_restricted_caller_sees_only_its_groups_and_no_stream_counts() -> None:
    search = FakeSearch(CHUNKS)

    async def go() -> None:
        async with mcp_face(search, **AUTH) as (_, url), \
                client(url, hs256("carol", ["payments"])) as mcp:
            await mcp.call_tool("search", {"question": QUESTION})
            health = structured(await mcp.call_tool("status", {}))
            assert health["counts"] == [] and health["counts_refused"] == "needs_all_access"
    asyncio.run(go())
    assert [q.access for q, _ in search.queries] == [Access.of("carol", ["payments"])]


def test_a_request_without_a_valid_token_is_refused_before_any_session() -> None:
    async def go() -> None:
        async with mcp_face(FakeSearch(CHUNKS), **AUTH) as (_, url), \
                httpx2.AsyncClient() as http:
            for headers, reason in (({}, "missing_token"),
                                    ({"Authorization": "Bearer wrong"}, "malformed_token")):
                response = await http.post(url, json={}, headers=headers)
                assert response.status_code == 401
                assert response.json()["error"]["reason"] == reason
    asyncio.run(go())
