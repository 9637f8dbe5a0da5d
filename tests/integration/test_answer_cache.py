"""The answer cache on the real multi-process mesh: a repeated question reuses its answer,
and an update of the cited document is answered from the new version, never the old one.

Inference runs in its own process here, so every cached answer is revalidated by a search
(services/inference/cache/serve.py); the unsearched hit of the one-process mesh is proven
in tests/unit/inference/cache/."""

from __future__ import annotations

import json
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.cli.mesh import Endpoints
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.mesh import produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
QUESTION = "why did the nightly export stall"
FIRST = "The nightly export stalled because the warehouse credentials had expired."
SECOND = "The nightly export stalled because the queue of the exporter was full."


def outcomes(metrics_url: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    return {s.labels["outcome"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "streamrag_inference_answer_cache_total"
            and s.labels["call"] == "query"}


def test_a_repeat_reuses_the_answer_and_an_update_is_never_answered_stale(
        mesh: Endpoints, mesh_metrics_url: str) -> None:
    doc_id, domain = uid("export"), uid("cache")
    doc = {"id": doc_id, "text": FIRST, "source": "cache-test", "domain": domain,
           "event_time": "2026-11-28T00:05:00Z", "title": "Nightly export"}
    produce(mesh, [json.dumps(doc).encode()], key=doc_id.encode())
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)

        def ask() -> pb.QueryResponse:
            return stub.Query(pb.QueryRequest(question=QUESTION, domain=domain, top_k=3),
                              timeout=15)
        first = eventually(lambda: (r := ask()).citations and r, "the document searchable")
        assert first.citations[0].version == 1 and "credentials" in first.answer
        before = outcomes(mesh_metrics_url)
        again = ask()
        assert again.answer == first.answer and again.timings.answer_ms == 0.0
        after_repeat = outcomes(mesh_metrics_url)
        assert after_repeat.get("revalidated", 0) == before.get("revalidated", 0) + 1

        update = {**doc, "text": SECOND, "event_time": "2026-11-28T01:05:00Z"}
        produce(mesh, [json.dumps(update).encode()], key=doc_id.encode())
        seen: list[pb.QueryResponse] = []

        def updated() -> bool:
            seen.append(ask())
            return seen[-1].citations[0].version == 2
        eventually(updated, "the update to be answered")
        for response in seen:  # while version 1 was searchable its answer stood; never after
            version = response.citations[0].version
            assert ("credentials" in response.answer) == (version == 1)
            assert ("queue of the exporter" in response.answer) == (version == 2)
        assert seen[-1].timings.answer_ms > 0.0  # made afresh from the new version
        final = outcomes(mesh_metrics_url)
        assert final.get("invalidated", 0) == after_repeat.get("invalidated", 0) + 1
        assert ask().answer == seen[-1].answer
        assert outcomes(mesh_metrics_url)["revalidated"] == final["revalidated"] + 1
