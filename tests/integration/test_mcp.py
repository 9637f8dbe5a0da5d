"""The MCP server against the real one-process mesh with the SDK's own clients: over
streamable HTTP (inference's MCP port) and over stdio (`streamrag mcp`, forwarding to the
gRPC API), search and ask cite what gRPC's Retrieve and Query cite for the same question,
and a bad argument is a tool error carrying gRPC's reason and field."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from services.cli.mesh import Endpoints
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.mesh import searchable_domain

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
QUESTION = "why did the payroll sync miss the cutoff"
DOCS = ("The payroll sync missed the cutoff because the bank endpoint rate-limited it.",
        "Payroll sync retried against the bank endpoint until after the cutoff passed.")


@pytest.fixture(scope="module")
def corpus(onebox_mesh: Endpoints) -> Iterator[tuple[str, Any]]:
    """Two documents in a domain of their own, searchable: (domain, gRPC stub)."""
    with searchable_domain(onebox_mesh, "mcp", DOCS, QUESTION, "Payroll") as (domain, api):
        yield domain, api


def stdio(mesh: Endpoints) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "services.cli.main", "mcp",
                                      "--target", mesh.grpc_target],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT))


def ids(citations: Any) -> list[tuple[str, str, str]]:
    return [(c["chunk_id"], c["doc_id"], c["text"]) if isinstance(c, dict)
            else (c.chunk_id, c.doc_id, c.text) for c in citations]


async def calls(server: Any, domain: str) -> dict[str, Any]:
    """search, ask and two bad calls through one MCP client."""
    args = {"question": QUESTION, "domain": domain, "top_k": 5}
    async with Client(server) as mcp:
        found = {
            "search": await mcp.call_tool("search", args),
            "ask": await mcp.call_tool("ask", args),
            "negative": await mcp.call_tool("search", {**args, "top_k": -1}),
            "empty": await mcp.call_tool("ask", {**args, "question": ""}),
        }
    return found


@pytest.mark.parametrize("face", ["http", "stdio"])
def test_tools_cite_what_grpc_cites_and_refuse_with_its_reasons(
        face: str, onebox_mesh: Endpoints, corpus: tuple[str, Any]) -> None:
    domain, api = corpus
    server = onebox_mesh.mcp_url if face == "http" else stdio(onebox_mesh)
    found = asyncio.run(calls(server, domain))
    request = {"question": QUESTION, "domain": domain, "top_k": 5}
    retrieved = api.Retrieve(pb.RetrieveRequest(**request), timeout=15)
    search = found["search"].structured_content
    assert not found["search"].is_error and ids(search["chunks"]) == ids(retrieved.chunks)
    assert {c["text"] for c in search["chunks"]} == set(DOCS)
    query = api.Query(pb.QueryRequest(**request), timeout=15)
    ask = found["ask"].structured_content
    assert not found["ask"].is_error and ask["answer"] == query.answer and query.answer
    assert ids(ask["citations"]) == ids(query.citations)
    assert ask["cited_chunk_ids"] == list(query.cited_chunk_ids)
    assert (ask["answer_mode"], ask["answer_mode_reason"]) == (query.answer_mode,
                                                              query.answer_mode_reason)
    for name, reason, field in (("negative", "top_k_out_of_range", "top_k"),
                                ("empty", "empty_question", "question")):
        assert found[name].is_error
        error = found[name].structured_content["error"]
        assert (error["status"], error["reason"], error["field"]) == (
            "INVALID_ARGUMENT", reason, field)
