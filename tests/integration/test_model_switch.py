"""A model change on the real broker: a new embedding model's index is built beside the old one
from the compacted chunk topic, and queries switch to it only once it has caught up.

Lean on purpose: its own broker, one worker hosting embedding (all-MiniLM-L6-v2), retrieval
and inference (told the next model), chunk sets produced straight to chunks.v1 with a plain
producer. A second embedding worker with a tiny locally built model (random weights, the
real tokenizer, another id and dimension) is started once the first model's answers are
checked. Every Retrieve meanwhile must answer in full, from one model's index alone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.cli.mesh import free_port, spawn_broker
from services.cli.procs import Child, service_argv, spawn, stop, wait_port
from shared.contract.codec import encode
from shared.contract.records import Chunk, ChunkSet
from shared.encoder.embedder import Encoder
from shared.encoder.model import MODEL_ID
from shared.kafka.admin import ensure_topics
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import KafkaSettings
from tests.support.polling import eventually
from tests.support.tinyencoder import TINY_DIM, TINY_ID, build_tiny_encoder

pytestmark = pytest.mark.integration
QUESTION = "why did the payment queue back up?"
TEXTS = {f"doc-{i}": f"Incident {i}: the {topic} stalled and the on-call engineer {fix}."
         for i, (topic, fix) in enumerate([
             ("payment queue", "restarted the consumer"), ("broker disk", "freed old segments"),
             ("search index", "rebuilt a shard"), ("login service", "rotated the key"),
             ("email relay", "raised the rate limit"), ("cache cluster", "added a node")])}


@dataclass
class Mesh:
    bootstrap: str
    grpc_target: str
    run_dir: Path
    tiny: Path
    children: list[Child]


@pytest.fixture(scope="module")
def switch_mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    run_dir = tmp_path_factory.mktemp("model-switch")
    tiny = build_tiny_encoder(run_dir / "tiny-model")
    port, grpc_port = free_port(), free_port()
    bootstrap = f"127.0.0.1:{port}"
    children = [spawn_broker("127.0.0.1", port, run_dir)]
    try:
        asyncio.run(ensure_topics(KafkaSettings(bootstrap=bootstrap)))
        env = {"STREAMRAG_KAFKA_BOOTSTRAP": bootstrap,
               "STREAMRAG_ONEBOX_SERVICES": json.dumps(["embedding", "retrieval", "inference"]),
               "STREAMRAG_DATA_DIR": str(run_dir / "data"),
               "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port),
               "STREAMRAG_INFERENCE_ENCODER_RUNTIME": "torch",  # one MiniLM load, shared
               "STREAMRAG_INFERENCE_HYBRID": "false",  # scores are inner products
               "STREAMRAG_INFERENCE_NEXT_MODEL_PATH": str(tiny),
               "STREAMRAG_INFERENCE_NEXT_MODEL_ID": TINY_ID,
               "STREAMRAG_INFERENCE_SWITCH_CHECK_S": "0.2"}
        children.append(spawn("onebox", service_argv("onebox"), run_dir, env))
        wait_port("127.0.0.1", grpc_port, 120, children[-1])
        yield Mesh(bootstrap, f"127.0.0.1:{grpc_port}", run_dir, tiny, children)
    finally:
        stop(children, 15)


def produce(bootstrap: str) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for doc_id, text in TEXTS.items():
                cs = ChunkSet(doc_id=doc_id, version=1, source="switch", domain="test",
                              event_time=1.0, ingest_time=time.time(),
                              chunks=(Chunk(chunk_id=f"{doc_id}#v1#0", ordinal=0, text=text,
                                            token_count=20),))
                await producer.send_and_wait("chunks.v1", encode(cs), key=doc_id.encode())
        finally:
            await producer.stop()
    asyncio.run(go())


def ask(mesh: Mesh) -> tuple[str, pb.RetrieveResponse | None]:
    """The model inference serves with, and a Retrieve of every document (None while the
    worker is not serving yet)."""
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)
        try:
            model = stub.Info(pb.InfoRequest(), timeout=10).model_id
            return model, stub.Retrieve(pb.RetrieveRequest(question=QUESTION, top_k=20),
                                        timeout=10)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:  # warming up; no shard yet
                return "", None
            raise


def expected_scores(encoder: Encoder) -> dict[str, float]:
    q = encoder.encode([QUESTION])[0]
    vectors = encoder.encode(list(TEXTS.values()))
    return {doc: float(v @ q) for doc, v in zip(TEXTS, vectors, strict=True)}


def scores(response: pb.RetrieveResponse) -> dict[str, float]:
    return {c.doc_id: c.score for c in response.chunks}


def from_model(response: pb.RetrieveResponse, want: dict[str, float]) -> bool:
    got = scores(response)
    return set(got) == set(want) and all(abs(got[d] - want[d]) < 1e-3 for d in want)


@pytest.mark.timeout(600)  # two model loads and a second worker's start on a loaded machine
def test_queries_switch_to_the_new_model_once_its_index_has_caught_up(
        switch_mesh: Mesh) -> None:
    mesh = switch_mesh
    old = expected_scores(Encoder(device="cpu"))
    new = expected_scores(Encoder(mesh.tiny, "cpu", model_id=TINY_ID))
    assert all(abs(old[d] - new[d]) > 1e-3 for d in TEXTS)  # the two are told apart
    produce(mesh.bootstrap)

    def all_from_old() -> bool:
        model, response = ask(mesh)
        return response is not None and model == MODEL_ID and from_model(response, old)
    eventually(all_from_old, "every document answered from all-MiniLM-L6-v2", 180)
    model, response = ask(mesh)  # the next model has no index yet: no switch
    assert model == MODEL_ID and response is not None and not response.partial

    env = {"STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_DATA_DIR": str(mesh.run_dir / "data-tiny"),
           "STREAMRAG_EMBEDDING_MODEL_PATH": str(mesh.tiny),
           "STREAMRAG_EMBEDDING_MODEL_ID": TINY_ID}
    mesh.children.append(spawn("embedding-tiny", service_argv("embedding"), mesh.run_dir, env))
    seen: list[str] = []

    def switched() -> bool:
        model, response = ask(mesh)
        assert response is not None and not response.partial, dict(response.shard_errors)
        # Complete, and from one model's index alone, before and after the switch.
        source = "old" if from_model(response, old) else "new" if from_model(response, new) \
            else f"mixed: {scores(response)}"
        seen.append(source)
        assert source in ("old", "new"), source
        return model == TINY_ID and source == "new"
    eventually(switched, "inference answering from the tiny model's complete index", 180)
    assert "old" not in seen[seen.index("new"):]  # switched once, for good
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        info = pb_grpc.InferenceStub(channel).Info(pb.InfoRequest(), timeout=10)
    assert (info.model_id, info.dim) == (TINY_ID, TINY_DIM)
    log = (mesh.run_dir / "logs" / "onebox.log").read_text()
    assert "indexing a new model test/tiny-bert-32 (dimension 32)" in log
    assert dead_letters(mesh.bootstrap) == []  # no record refused as another model's


def dead_letters(bootstrap: str) -> list[bytes]:
    async def go() -> list[bytes]:
        consumer = AIOKafkaConsumer("deadletter.v1", bootstrap_servers=bootstrap,
                                    group_id=None, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=10)
        await consumer.start()
        try:
            batch = await consumer.getmany(timeout_ms=3000)
            return [r.value for records in batch.values() for r in records]
        finally:
            await consumer.stop()
    return asyncio.run(go())
