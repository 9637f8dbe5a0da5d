"""Reranking against the real mesh: an inference runtime with a cross-encoder, in process.

An InferenceRuntime (the gRPC server, search client, encoder and reranker the worker runs)
is started in this process next to the session mesh, with a tiny random-weight BERT
cross-encoder (tests/support/tinyreranker.py) loaded from its folder as the reranker. It
searches the mesh's real shards through the broker and reorders the candidates by the
model; it is asked over gRPC. In process rather than as a second worker: the same code
path, without a minute of worker start-up on a busy machine. The model's scores mean
nothing, but they are deterministic: the test runs the same model itself on each
(question, passage) pair and checks the runtime's order and rerank scores against the
mesh's own (unreranked) instance's candidates, re-sorted by those scores.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from scripts.benchlib.tinyreranker import build_tiny_reranker
from services.cli.mesh import Endpoints
from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from shared.encoder.passage import passage
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import KafkaSettings
from tests.support.mesh import produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
QUESTION = "why did the nightly invoice run fail"
DOCS = ("The nightly invoice run failed because the tax service returned errors.",
        "Invoices were mailed late after the printer queue stalled overnight.",
        "The invoice run was retried at six and finished without errors.",
        "Cafeteria menus changed for the spring term.",
        "A schema migration locked the invoices table during the nightly run.")
CANDIDATES = 4  # fewer than the documents: the fifth by search is never re-scored
TOP_K = 3
TIMEOUT_S = 60  # per call: the machine may be busy with other suites


def _retrieve(target: str, source: str, top_k: int) -> pb.RetrieveResponse:
    with grpc.insecure_channel(target) as channel:
        return pb_grpc.InferenceStub(channel).Retrieve(
            pb.RetrieveRequest(question=QUESTION, source=source, top_k=top_k),
            timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def source(mesh: Endpoints) -> str:
    """The documents' source, once all of them are searchable through the mesh."""
    source = uid("rerank-src")
    produce(mesh, [json.dumps({"id": uid("inv"), "text": text, "source": source,
                               "title": f"Invoice note {i}"}).encode()
                   for i, text in enumerate(DOCS)])
    eventually(lambda: len(_retrieve(mesh.grpc_target, source, 10).chunks) == len(DOCS),
               "every document searchable")
    return source


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_reranker(tmp_path_factory.mktemp("rerank") / "tiny-cross-encoder")


def _reference(folder: Path, citations: Any) -> list[float]:
    """Each candidate's score from the model itself, one pair per forward pass."""
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    with torch.inference_mode():
        return [float(model(**tokenizer(QUESTION, passage(c.title.strip(), c.text),
                                        truncation=True, max_length=256,
                                        return_tensors="pt")).logits[0, 0])
                for c in citations]


async def _ask(mesh: Endpoints, folder: Path, source: str,
               ) -> tuple[Any, Any, Any, Any, InferenceRuntime]:
    """Retrieve, Query, StreamQuery's start and Info from a reranking runtime."""
    settings = InferenceSettings(grpc_port=0, grace_s=0.2, reranker_path=folder,
                                 rerank_candidates=CANDIDATES, shard_timeout_s=5,
                                 device="cpu")  # the reference scores on the CPU in fp32
    runtime = InferenceRuntime(settings, KafkaSettings(bootstrap=mesh.bootstrap))
    await runtime.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
            stub = pb_grpc.InferenceStub(channel)
            retrieve = pb.RetrieveRequest(question=QUESTION, source=source, top_k=TOP_K)
            for _ in range(int(TIMEOUT_S / 0.2)):  # until warm: UNAVAILABLE before
                try:
                    retrieved = await stub.Retrieve(retrieve, timeout=TIMEOUT_S)
                    break
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                    await asyncio.sleep(0.2)
            else:
                pytest.fail("the reranking runtime never answered")
            request = pb.QueryRequest(question=QUESTION, source=source, top_k=TOP_K)
            query = await stub.Query(request, timeout=TIMEOUT_S)
            start = [e async for e in stub.StreamQuery(request, timeout=TIMEOUT_S)][0].start
            info = await stub.Info(pb.InfoRequest(), timeout=TIMEOUT_S)
    finally:
        await runtime.stop()
    return retrieved, query, start, info, runtime


def test_every_call_cites_the_candidates_in_the_cross_encoders_order(
        mesh: Endpoints, folder: Path, source: str) -> None:
    # The first stage: the mesh's own instance (no reranker) over the same shards.
    candidates = _retrieve(mesh.grpc_target, source, CANDIDATES).chunks
    assert not any(c.HasField("rerank_score") for c in candidates)
    scores = _reference(folder, candidates)
    best = sorted(range(CANDIDATES), key=lambda i: -scores[i])[:TOP_K]
    assert best != list(range(TOP_K))  # the model does change the order

    retrieved, query, start, info, runtime = asyncio.run(_ask(mesh, folder, source))
    assert [c.chunk_id for c in retrieved.chunks] == [candidates[i].chunk_id for i in best]
    assert [c.rerank_score for c in retrieved.chunks] == pytest.approx(
        [scores[i] for i in best], abs=1e-4)
    assert retrieved.timings.rerank_ms > 0 and not retrieved.partial
    for citations in (query.citations, start.citations):
        assert [c.chunk_id for c in citations] == [c.chunk_id for c in retrieved.chunks]
        assert [c.rerank_score for c in citations] == pytest.approx(
            [c.rerank_score for c in retrieved.chunks], abs=1e-5)
    assert (info.reranker_model, info.reranker_device, info.rerank_candidates) == (
        "tiny-cross-encoder", "cpu", CANDIDATES)
    metrics = runtime.metrics
    assert metrics.sample("streamrag_inference_rerank_seconds_count") == 3
    assert 1 <= metrics.sample("streamrag_inference_batch_size_count",
                               {"batcher": "rerank"}) <= 3
