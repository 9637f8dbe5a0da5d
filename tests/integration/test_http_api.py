"""The HTTP/JSON API against the real one-process mesh, with a plain HTTP client: the same
citations and answers as the gRPC stub, a refusal naming the field, a streamed answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from services.cli.mesh import Endpoints
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.support.mesh import searchable_domain

pytestmark = pytest.mark.integration
QUESTION = "why did the invoice export stall overnight"
DOCS = ("The invoice export stalled overnight because the reporting database was locked.",
        "Overnight the invoice export waited on a lock held by the nightly vacuum job.")


@pytest.fixture(scope="module")
def corpus(onebox_mesh: Endpoints) -> Iterator[tuple[str, Any, str]]:
    """Two documents in a domain of their own, searchable: (domain, gRPC stub, HTTP URL)."""
    with searchable_domain(onebox_mesh, "http", DOCS, QUESTION, "Export") as (domain, api):
        yield domain, api, onebox_mesh.http_url


def chunk_ids(citations: Any) -> list[tuple[str, str, str]]:
    """What two calls must agree on (scores may differ in the last bits between calls)."""
    return [(c["chunk_id"], c["doc_id"], c["text"]) if isinstance(c, dict)
            else (c.chunk_id, c.doc_id, c.text) for c in citations]


def test_retrieve_and_query_cite_what_grpc_cites(corpus: tuple[str, Any, str]) -> None:
    domain, api, http = corpus
    body = {"question": QUESTION, "domain": domain, "top_k": 5}
    retrieved = requests.post(f"{http}/v1/retrieve", json=body, timeout=30)
    assert retrieved.status_code == 200, retrieved.text
    by_grpc = api.Retrieve(pb.RetrieveRequest(**body), timeout=15)
    assert chunk_ids(retrieved.json()["chunks"]) == chunk_ids(by_grpc.chunks)
    assert {c["text"] for c in retrieved.json()["chunks"]} == set(DOCS)
    answered = requests.post(f"{http}/v1/query", json=body, timeout=30)
    assert answered.status_code == 200, answered.text
    query = api.Query(pb.QueryRequest(**body), timeout=15)
    assert answered.json()["answer"] == query.answer and query.answer
    assert chunk_ids(answered.json()["citations"]) == chunk_ids(query.citations)
    assert answered.json()["cited_chunk_ids"] == list(query.cited_chunk_ids)


def test_stream_query_streams_the_query_answer(corpus: tuple[str, Any, str]) -> None:
    domain, api, http = corpus
    body = {"question": QUESTION, "domain": domain, "top_k": 5}
    with requests.post(f"{http}/v1/query:stream", json=body, stream=True,
                       timeout=30) as streamed:
        assert streamed.status_code == 200
        assert streamed.headers["Content-Type"] == "text/event-stream"
        text = streamed.text
    events = []
    for block in filter(None, text.split("\n\n")):
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and set(kinds[1:-1]) == {"delta"}
    query = api.Query(pb.QueryRequest(**body), timeout=15)
    assert "".join(data["delta"] for _, data in events[1:-1]) == query.answer
    assert chunk_ids(events[0][1]["start"]["citations"]) == chunk_ids(query.citations)


def test_a_bad_body_is_400_naming_the_field(corpus: tuple[str, Any, str]) -> None:
    _, _, http = corpus
    for body, reason, field in (({"question": QUESTION, "top_k": "many"}, "wrong_type",
                                 "top_k"),
                                ({"question": QUESTION, "top_k": 10_000}, "top_k_out_of_range",
                                 "top_k")):
        reply = requests.post(f"{http}/v1/query", json=body, timeout=30)
        assert reply.status_code == 400
        error = reply.json()["error"]
        assert (error["status"], error["reason"], error["field"]) == (
            "INVALID_ARGUMENT", reason, field)


def test_the_openapi_document_is_served(corpus: tuple[str, Any, str]) -> None:
    _, _, http = corpus
    document = requests.get(f"{http}/openapi.json", timeout=30).json()
    assert set(document["paths"]) == {"/v1/query", "/v1/query:stream", "/v1/retrieve",
                                      "/v1/info", "/v1/feedback", "/v1/stats"}
    info = requests.post(f"{http}/v1/info", timeout=30).json()
    assert info["ready"] is True and info["shards"] == 4
