"""One-process mode searches its own shards in-process, and answers exactly as the broker
path does: the same chunks with the same scores, for the same questions and filters."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from services.cli.mesh import Endpoints, free_port
from services.cli.procs import Child, service_argv, spawn, stop
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.mesh import produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration

TOPICS = ["checkout", "billing", "search", "login", "payments", "inventory"]
TEXT = ("The {t} service returned HTTP 502 errors for ten minutes after deploy {i}. "
        "On-call traced it to an expired TLS certificate on the {t} gateway and rotated it.")
QUESTIONS = [f"why did {t} return 502 errors?" for t in TOPICS] + ["expired TLS certificate"]


@dataclass
class Worker:
    target: str
    metrics_url: str


def retrieve(target: str, question: str, source: str, domain: str = "") -> pb.RetrieveResponse:
    with grpc.insecure_channel(target) as channel:
        return pb_grpc.InferenceStub(channel).Retrieve(
            pb.RetrieveRequest(question=question, top_k=8, source=source, domain=domain),
            timeout=15)


def searches(metrics_url: str, path: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "streamrag_inference_searches_total" and s.labels["path"] == path)


def unsearched(metrics_url: str) -> float:
    """Retrieve calls the answer cache served from these shards' unchanged index, with no
    search (services/inference/cache/serve.py)."""
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "streamrag_inference_answer_cache_total"
               and s.labels["call"] == "retrieve" and s.labels["outcome"] == "hit")


def serving(target: str, child: Child) -> bool:
    assert child.alive(), child.log_path.read_text(errors="replace")[-3000:]
    with grpc.insecure_channel(target) as channel:
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1).status
        except grpc.RpcError:
            return False
    return bool(status == health_pb2.HealthCheckResponse.SERVING)


@pytest.fixture(scope="module")
def corpus(onebox_mesh: Endpoints) -> str:
    source = uid("local")
    docs = [json.dumps({"id": f"{source}-{i}", "source": source,
                        "domain": "even" if i % 2 == 0 else "odd",
                        "text": TEXT.format(t=TOPICS[i % len(TOPICS)], i=i)}).encode()
            for i in range(12)]
    produce(onebox_mesh, docs)
    # Unkeyed, the twelve land on partitions of their own, in no order: eight found says
    # nothing of the other four, and the test counts all six of each domain.
    eventually(lambda: all(len(retrieve(onebox_mesh.grpc_target, QUESTIONS[-1], source,
                                        domain).chunks) == 6 for domain in ("even", "odd")),
               "all twelve documents of the corpus to become searchable")
    return source


@pytest.fixture(scope="module")
def broker_worker(onebox_mesh: Endpoints, tmp_path_factory: pytest.TempPathFactory,
                  ) -> Iterator[Worker]:
    """A second inference worker on the same broker and shards, always over the broker."""
    work = tmp_path_factory.mktemp("broker-path")
    port, metrics_port = free_port(), free_port()
    env = {"STREAMRAG_KAFKA_BOOTSTRAP": onebox_mesh.bootstrap,
           "STREAMRAG_INFERENCE_GRPC_PORT": str(port),
           "STREAMRAG_INFERENCE_METRICS_PORT": str(metrics_port),
           "STREAMRAG_DATA_DIR": str(work / "data"),
           "STREAMRAG_INFERENCE_LOCAL_SEARCH": "false"}
    child = spawn("inference-broker-path", service_argv("inference"), work / "run", env)
    target = f"127.0.0.1:{port}"
    try:
        eventually(lambda: serving(target, child), f"SERVING on {target}", 240)
        yield Worker(target, f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        stop([child], 15)


def ranked(response: pb.RetrieveResponse) -> list[tuple[str, float]]:
    assert not response.partial, (list(response.missing_shards), dict(response.shard_errors))
    return [(c.chunk_id, c.score) for c in response.chunks]


def test_local_and_broker_paths_return_the_same_chunks_and_scores(
        onebox_mesh: Endpoints, onebox_metrics_url: str, corpus: str,
        broker_worker: Worker) -> None:
    local_before = searches(onebox_metrics_url, "local") + unsearched(onebox_metrics_url)
    asked = 0
    for question in QUESTIONS:
        for domain in ("", "even"):
            local = ranked(retrieve(onebox_mesh.grpc_target, question, corpus, domain))
            remote = ranked(retrieve(broker_worker.target, question, corpus, domain))
            asked += 1
            assert len(local) == (6 if domain else 8)  # 12 docs, 6 of them "even"
            assert [c for c, _ in local] == [c for c, _ in remote], question
            assert [s for _, s in local] == pytest.approx([s for _, s in remote], rel=1e-6)
    # Every one of these searches ran on the one-process worker's own shards (or was
    # answered by its cache from their unchanged index, the question asked just before) ...
    local_after = searches(onebox_metrics_url, "local") + unsearched(onebox_metrics_url)
    assert local_after - local_before == asked
    # ... and the other worker's went through the broker.
    assert searches(broker_worker.metrics_url, "broker") >= asked
    assert searches(broker_worker.metrics_url, "local") == 0
