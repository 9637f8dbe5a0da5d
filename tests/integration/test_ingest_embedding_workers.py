"""Two real embedding workers share chunks.v1; a stalled one does not stall the other.

Runs on its own broker so the workers' consumer group is theirs alone. Talks to them
only through Kafka: ChunkSets in with a plain producer, EmbeddedChunkSets and dead
letters out with a plain consumer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.cli.mesh import free_port, spawn_broker
from services.cli.procs import Child, service_argv, spawn, stop
from shared.contract.codec import encode
from shared.contract.records import Chunk, ChunkSet, EmbeddedChunkSet, decode_vector
from shared.encoder.embedder import MODEL_ID, Encoder
from shared.kafka.admin import ensure_topics
from shared.settings import KafkaSettings

pytestmark = pytest.mark.integration
TIMEOUT_S = 180


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Child]]]:
    run_dir = tmp_path_factory.mktemp("embedding-workers")
    bootstrap = f"127.0.0.1:{free_port()}"
    children = [spawn_broker("127.0.0.1", int(bootstrap.split(":")[1]), run_dir)]
    try:
        asyncio.run(ensure_topics(KafkaSettings(bootstrap=bootstrap)))
        for i in range(2):
            env = {"STREAMRAG_KAFKA_BOOTSTRAP": bootstrap,
                   "STREAMRAG_DATA_DIR": str(run_dir / f"data{i}")}
            children.append(spawn(f"embedding{i}", service_argv("embedding"), run_dir, env))
        yield bootstrap, children
    finally:
        for child in children:
            if child.alive():
                os.killpg(child.popen.pid, signal.SIGCONT)
        stop(children, 15)


def chunk_set(doc_id: str, text: str) -> ChunkSet:
    return ChunkSet(doc_id=doc_id, version=1, source="workers", domain="test", event_time=1.0,
                    ingest_time=time.time(),
                    chunks=(Chunk(chunk_id=f"{doc_id}#v1#0#x", ordinal=0, text=text,
                                  token_count=12),))


async def produce(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait("chunks.v1", value, key=key)
    finally:
        await producer.stop()


async def collect(bootstrap: str, topic: str, want: set[str]) -> dict[str, Any]:
    """Records on `topic` by key until every key in `want` is there."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", fetch_max_wait_ms=10)
    await consumer.start()
    got: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not want <= set(got) and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=300)).values():
                got.update({r.key.decode(): json.loads(r.value) for r in records if r.key})
    finally:
        await consumer.stop()
    missing = want - set(got)
    assert not missing, f"never arrived on {topic}: {sorted(missing)}"
    return got


def wave(name: str, n: int) -> dict[str, str]:
    return {f"{name}-{i}": f"Incident {i} of {name}: the {name} queue backed up on node {i}."
            for i in range(n)}


def check_vectors(got: dict[str, Any], texts: dict[str, str], encoder: Encoder) -> None:
    expected = encoder.encode(list(texts.values()))
    for doc_id, want in zip(texts, expected, strict=True):
        out = EmbeddedChunkSet.model_validate(got[doc_id])
        assert (out.model_id, out.dim) == (MODEL_ID, 384)
        vec = decode_vector(out.chunks[0].vector)
        assert float(np.dot(vec, want)) == pytest.approx(1.0, abs=1e-4)


def test_workers_share_partitions_and_survive_a_stalled_peer(
        workers: tuple[str, list[Child]]) -> None:
    bootstrap, (_, first, second) = workers
    encoder = Encoder(device="cpu")
    texts = wave("first", 16)
    records = [(k.encode(), encode(chunk_set(k, t))) for k, t in texts.items()]
    asyncio.run(produce(bootstrap, [*records, (b"poison", b'{"doc_id": ')]))
    check_vectors(asyncio.run(collect(bootstrap, "chunks.embedded.v1", set(texts))), texts,
                  encoder)
    letters = asyncio.run(collect(bootstrap, "deadletter.v1", {"poison"}))
    assert (letters["poison"]["stage"], letters["poison"]["reason"]) == ("embedding",
                                                                         "malformed_json")

    # Freeze one worker (a worker that hangs, not one that exits): after the session
    # timeout the group moves its partitions to the other, which embeds everything.
    os.killpg(first.popen.pid, signal.SIGSTOP)
    texts = wave("second", 16)
    asyncio.run(produce(bootstrap, [(k.encode(), encode(chunk_set(k, t)))
                                    for k, t in texts.items()]))
    check_vectors(asyncio.run(collect(bootstrap, "chunks.embedded.v1", set(texts))), texts,
                  encoder)
    assert second.alive()
    logs = Path(second.log_path).read_text()
    assert "embedded" in logs and "ready on cpu" in logs
