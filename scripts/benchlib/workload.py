"""The query benchmarks' corpus: incident reports of a few services, produced to the mesh
and waited for (bench_query and its --cache workload)."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
from aiokafka import AIOKafkaProducer

from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

TOPICS = ["checkout", "billing", "search", "login", "payments", "inventory", "shipping",
          "notifications"]
TEXT = ("The {t} service returned HTTP 502 errors for ten minutes after a deploy. "
        "On-call traced it to an expired TLS certificate on the {t} gateway and rotated it. "
        "Error rates fell back to normal four minutes later. A follow-up adds an alert "
        "thirty days before any certificate expires. Incident number {i} is closed.")


async def produce_corpus(bootstrap: str, docs: int, source: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(docs):
            doc = {"id": f"{source}-{i}", "source": source,
                   "text": TEXT.format(t=TOPICS[i % len(TOPICS)], i=i)}
            await producer.send_and_wait("docs.raw.v1", json.dumps(doc).encode(),
                                         key=doc["id"].encode())
    finally:
        await producer.stop()


async def wait_searchable(stub: pb_grpc.InferenceStub, source: str, docs: int) -> None:
    # Most of the corpus, not all: one document lost upstream should not sink the bench.
    want = max(1, min(docs, 20) * 3 // 4)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            # One new token: with a generator, the wait is for retrieval, not for answers.
            resp = await stub.Query(pb.QueryRequest(question="TLS certificate expired",
                                                    source=source, top_k=want,
                                                    max_new_tokens=1, answer_mode="extractive"),
                                    timeout=30)
        except grpc.aio.AioRpcError as exc:  # a busy mesh still settling: try again
            print(f"  searchable: not yet ({exc.code().name})", flush=True)
        else:
            print(f"  searchable: {len(resp.citations)}/{want}", flush=True)
            if len(resp.citations) >= want:
                return
        await asyncio.sleep(2)
    raise TimeoutError("the corpus never became searchable")
