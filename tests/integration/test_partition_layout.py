"""A mesh whose partition counts are not the default, end to end on the real embedded broker
(one worker process): bring-up creates every topic with its group's count (6 documents, 3
audit, 5 telemetry), a document on each of the six partitions is searchable, inference
scatters to six shards and every one answers, and the audit trail is anchored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from services.cli.mesh import Endpoints, isolated
from services.cli.trace import partition_of
from shared.contract.topics import all_topic_specs
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import PartitionSettings
from tests.support.mesh import MESH_ENV, produce, read_topic, uid
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
LAYOUT = PartitionSettings(partitions_documents=6, partitions_audit=3, partitions_telemetry=5)
ENV = {"STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS": "6", "STREAMRAG_KAFKA_PARTITIONS_AUDIT": "3",
       "STREAMRAG_KAFKA_PARTITIONS_TELEMETRY": "5"}
WORDS = ("quillomber", "vantrisk", "moldavex", "pernicoat", "sulvaran", "trebizond")


@pytest.fixture(scope="module")
def six(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    with isolated(tmp_path_factory.mktemp("six"), ROOT / ".tools/node_modules/.bin/anvil",
                  env={**MESH_ENV, **ENV}, processes=False) as endpoints:
        yield endpoints


def topic_counts(mesh: Endpoints, names: list[str]) -> dict[str, int]:
    async def go() -> dict[str, int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=mesh.bootstrap)
        await admin.start()
        try:
            return {m["topic"]: len(m["partitions"]) for m in await admin.describe_topics(names)}
        finally:
            await admin.close()
    return asyncio.run(go())


def one_doc_per_partition() -> dict[int, str]:
    """A fresh doc id for each of the six document partitions (the producers' murmur2)."""
    ids: dict[int, str] = {}
    while len(ids) < LAYOUT.partitions_documents:
        doc_id = uid("six")
        ids.setdefault(partition_of(doc_id, LAYOUT.partitions_documents), doc_id)
    return ids


def retrieved(mesh: Endpoints, question: str, source: str) -> list[Any]:
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        try:
            return list(pb_grpc.InferenceStub(channel).Retrieve(
                pb.RetrieveRequest(question=question, top_k=10, source=source),
                timeout=15).chunks)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
            return []


def test_every_topic_and_reader_follows_the_configured_counts(six: Endpoints) -> None:
    want = {s.name: s.partitions for s in all_topic_specs(LAYOUT)}
    assert topic_counts(six, sorted(want)) == want
    assert {want["docs.raw.v1"], want["chunks.embedded.v1"], want["search.requests.v1"],
            want["audit.batches.v1"], want["feedback.v1"], want["deadletter.v1"]} == {6, 3, 5, 1}

    docs = one_doc_per_partition()
    produce(six, [json.dumps({"id": doc_id, "source": doc_id,
                              "text": f"The {WORDS[p]} valve was serviced on the third pier."
                              }).encode() for p, doc_id in sorted(docs.items())])
    for p, doc_id in sorted(docs.items()):
        chunks = eventually(partial(retrieved, six, f"{WORDS[p]} valve", doc_id),
                            f"document on partition {p}")
        assert {c.doc_id for c in chunks} == {doc_id}

    with grpc.insecure_channel(six.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)
        assert stub.Info(pb.InfoRequest(), timeout=15).shards == 6
        answer = stub.Query(pb.QueryRequest(question=f"{WORDS[0]} valve", top_k=5), timeout=15)
    assert (list(answer.missing_shards), dict(answer.shard_errors)) == ([], {})
    assert docs[0] in {c.doc_id for c in answer.citations}

    # Redaction keys each audit batch by its docs.normalized.v1 partition: all six, on the
    # three audit partitions, and the ledger anchors them.
    def batch_keys() -> set[bytes]:
        return {r.key for r in read_topic(six, "audit.batches.v1")}
    keys = eventually(lambda: batch_keys() if len(batch_keys()) == 6 else None,
                      "audit batches of all six partitions")
    assert keys == {str(p).encode() for p in range(6)}
    eventually(lambda: read_topic(six, "ledger.anchors.v1"), "an anchored batch")
