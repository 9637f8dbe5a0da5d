"""Every Inference RPC against the real mesh, through a plain generated stub."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
from aiokafka import AIOKafkaProducer
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from services.cli.mesh import Endpoints
from shared.contract.records import encode_vector
from shared.contract.topics import CHUNKS_EMBEDDED
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.mesh import produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
QUESTION = "why did checkout payments time out at the gateway"
DOCS = ("The payment gateway timed out during checkout on Friday evening.",
        "Checkout payments timed out because the gateway certificate had expired.")


@pytest.fixture(scope="module")
def corpus(mesh: Endpoints) -> Iterator[tuple[str, grpc.Channel]]:
    """Two documents in a domain of their own, searchable; yields (domain, channel)."""
    domain = uid("api")
    values = [json.dumps({"id": uid("pay"), "text": text, "source": "api-test",
                          "domain": domain, "title": f"Checkout incident {i}"}).encode()
              for i, text in enumerate(DOCS)]
    produce(mesh, values)
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        eventually(lambda: len(_query(channel, domain).citations) == 2, "both documents")
        yield domain, channel


def _stub(channel: grpc.Channel) -> Any:
    return pb_grpc.InferenceStub(channel)


def _query(channel: grpc.Channel, domain: str) -> pb.QueryResponse:
    return _stub(channel).Query(pb.QueryRequest(question=QUESTION, domain=domain, top_k=5),
                                timeout=15)


def test_query_and_stream_query_give_the_same_answer(corpus: tuple[str, grpc.Channel]) -> None:
    domain, channel = corpus
    answer = _query(channel, domain)
    assert {c.text for c in answer.citations} == set(DOCS)
    assert answer.answer_mode == "extractive" and not answer.partial
    assert set(answer.cited_chunk_ids) <= {c.chunk_id for c in answer.citations}
    assert answer.cited_chunk_ids
    events = list(_stub(channel).StreamQuery(
        pb.QueryRequest(question=QUESTION, domain=domain, top_k=5), timeout=15))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and set(kinds[1:-1]) == {"delta"}
    assert "".join(e.delta for e in events[1:-1]) == answer.answer
    assert [c.chunk_id for c in events[0].start.citations] == [
        c.chunk_id for c in answer.citations]
    assert list(events[-1].end.cited_chunk_ids) == list(answer.cited_chunk_ids)


def test_info_and_embed(corpus: tuple[str, grpc.Channel]) -> None:
    _, channel = corpus
    info = _stub(channel).Info(pb.InfoRequest(), timeout=15)
    assert info.ready and info.shards == 4 and info.answer_mode == "extractive"
    assert info.dim > 0 and info.limits.max_embed_texts >= 3
    texts = ["disk full on node b7", "lunch was late", "disk full on node b7"]
    response = _stub(channel).Embed(pb.EmbedRequest(texts=texts), timeout=30)
    vectors = np.array([list(v.values) for v in response.vectors], dtype=np.float32)
    assert (response.model_id, response.dim) == (info.model_id, info.dim)
    assert vectors.shape == (3, info.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(vectors[0], vectors[2], atol=1e-5)
    assert float(vectors[0] @ vectors[1]) < 0.9  # different texts, different vectors


def test_info_reports_the_current_minutes_query_latencies(
        corpus: tuple[str, grpc.Channel]) -> None:
    domain, channel = corpus

    def query_then_info() -> list[Any]:
        # A query each poll: the one-minute window may roll over between polls.
        _query(channel, domain)
        info = _stub(channel).Info(pb.InfoRequest(), timeout=15)
        return [m for m in info.latency if m.method == "Query" and m.count >= 1]
    latency = eventually(query_then_info, "Query in the latency table")[0]
    assert 0 < latency.p50_ms <= latency.p95_ms <= latency.p99_ms < 15_000


def test_clicks_and_skips_reorder_the_citations(corpus: tuple[str, grpc.Channel]) -> None:
    domain, channel = corpus
    first, second = (c.chunk_id for c in _query(channel, domain).citations)
    # Ten of each reach the boost cap (+-0.2 at the default weight): a swing of 0.4 is
    # more than the score gap of two sentences on the same incident.
    for _ in range(10):
        assert _stub(channel).Feedback(pb.FeedbackRequest(
            chunk_id=second, kind=pb.FEEDBACK_KIND_CLICK), timeout=15).accepted
        assert _stub(channel).Feedback(pb.FeedbackRequest(
            chunk_id=first, kind=pb.FEEDBACK_KIND_SKIP), timeout=15).accepted
    eventually(lambda: [c.chunk_id for c in _query(channel, domain).citations]
               == [second, first], "the clicked chunk to rank first")


def test_bad_requests_name_the_field(corpus: tuple[str, grpc.Channel]) -> None:
    _, channel = corpus
    with pytest.raises(grpc.RpcError) as err:
        _stub(channel).Query(pb.QueryRequest(question=QUESTION, top_k=100_000), timeout=15)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "top_k" in err.value.details()
    assert ("streamrag-field", "top_k") in tuple(err.value.trailing_metadata())
    with pytest.raises(grpc.RpcError) as err:
        _stub(channel).Feedback(pb.FeedbackRequest(chunk_id="c"), timeout=15)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "invalid kind" in err.value.details()


def test_reflection_lists_inference_and_health(corpus: tuple[str, grpc.Channel]) -> None:
    _, channel = corpus
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=15)
    names = {s.name for a in answers for s in a.list_services_response.service}
    assert {"streamrag.v1.Inference", "grpc.health.v1.Health"} <= names


def test_stored_values_that_cannot_be_rendered_never_fail_an_answer(
        mesh: Endpoints, corpus: tuple[str, grpc.Channel]) -> None:
    """Chunks written below ingest (which refuses such values) straight to the embedded
    topic, the way the embedding service writes them: one with an event time 1e16 s from
    the epoch (year 316,889,355), one whose title holds a lone surrogate escape."""
    _, channel = corpus
    info = _stub(channel).Info(pb.InfoRequest(), timeout=15)
    domain, text = uid("odd"), "The checkout gateway certificate expired at an odd time."
    vector = list(_stub(channel).Embed(pb.EmbedRequest(texts=[text]), timeout=30)
                  .vectors[0].values)
    odd, bad = uid("far-future"), uid("bad-title")
    produce_embedded(mesh, [
        embedded_chunk_set(odd, domain, text, vector, info, event_time=1e16),
        embedded_chunk_set(bad, domain, text, vector, info, title_json='"t\\ud800"')])
    request = pb.QueryRequest(question=QUESTION, domain=domain, top_k=5)
    # Query and StreamQuery both answer (before: UNKNOWN, OverflowError, for every query
    # that retrieved the far-future chunk); the surrogate one is left out by its shard.
    # A reply message is always truthy: wait for one that cites something, or an answer
    # given before the chunks reached the index would fail the test instead of the code.
    answer = eventually(lambda: _cited(_stub(channel).Query(request, timeout=15)),
                        "the far-future chunk searchable")
    assert [c.doc_id for c in answer.citations] == [odd] and not answer.partial
    cited = answer.citations[0]
    assert (cited.event_time, cited.event_time_iso, cited.text) == (1e16, "", text)
    assert answer.answer
    events = list(_stub(channel).StreamQuery(request, timeout=15))
    assert [e.WhichOneof("event") for e in events][-1] == "end"
    assert events[0].start.citations[0].event_time_iso == ""


def _cited(answer: Any) -> Any:
    return answer if answer.citations else None


def embedded_chunk_set(doc_id: str, domain: str, text: str, vector: list[float], info: Any,
                       event_time: float = 1.7e9, title_json: str = '"odd"') -> bytes:
    chunk = {"chunk_id": f"{doc_id}#v1#0", "ordinal": 0, "text": text, "token_count": 10,
             "vector": encode_vector(np.array(vector, dtype=np.float32))}
    record = {"schema_version": 1, "doc_id": doc_id, "version": 1, "op": "upsert",
              "source": "odd-test", "domain": domain, "event_time": event_time,
              "ingest_time": 1.7e9, "model_id": info.model_id, "dim": info.dim,
              "chunks": [chunk], "title": "__TITLE__"}
    # json.dumps would escape a real surrogate; write the JSON escape itself.
    return json.dumps(record).replace('"__TITLE__"', title_json).encode()


def produce_embedded(mesh: Endpoints, values: list[bytes]) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap)
        await producer.start()
        try:
            for value in values:
                key = json.loads(value)["doc_id"].encode()
                await producer.send_and_wait(CHUNKS_EMBEDDED.name, value, key=key)
        finally:
            await producer.stop()
    asyncio.run(go())


def test_the_query_encoder_runs_onnx_and_matches_the_chunk_encoder(
        mesh: Endpoints, corpus: tuple[str, grpc.Channel]) -> None:
    """Inference encodes questions on ONNX Runtime's int8 graph (its default), embedding
    encodes chunks on torch (fp32): the vectors must stay close and each text nearest its
    own chunk-encoder vector, or questions would miss their chunks. (fp32 ONNX matches torch
    to a cosine of 0.9999: tests/unit/shared/test_encoder_runtime.py.)"""
    pytest.importorskip("onnxruntime")
    from shared.encoder.embedder import Encoder

    _, channel = corpus
    log = (mesh.run_dir / "logs" / "inference.log").read_text(errors="replace")
    assert "inference SERVING (encoder on cpu, onnx, int8)" in log
    texts = [QUESTION, *DOCS]
    response = _stub(channel).Embed(pb.EmbedRequest(texts=texts), timeout=30)
    served = np.array([list(v.values) for v in response.vectors], dtype=np.float32)
    local = Encoder(device="cpu").encode(texts)
    # A wrong graph (mask, pooling, another model) lands far below; int8 moves a little.
    assert float(np.min(np.sum(served * local, axis=1))) >= 0.95
    assert list(np.argmax(served @ local.T, axis=1)) == list(range(len(texts)))
