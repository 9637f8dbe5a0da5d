"""Asks every retrieval shard the way inference does, over a plain Kafka client.

The retrieval-worker integration tests and scripts/bench_retrieval's broker recovery use it.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from shared.contract.codec import decode, encode
from shared.contract.records import SearchReply, SearchRequest, SearchSpec, encode_vector
from shared.contract.topics import SEARCH_REPLIES, SEARCH_REQUESTS


class Asker:
    """Asks every shard the way inference does: one SearchRequest per partition."""

    def __init__(self, bootstrap: str, model: str, dim: int) -> None:
        self.model, self.dim = model, dim
        self.consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                         fetch_max_wait_ms=10)
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap)

    async def __aenter__(self) -> Asker:
        await self.consumer.start()
        await self.producer.start()
        tps = [TopicPartition(SEARCH_REPLIES.name, p) for p in range(SEARCH_REPLIES.partitions)]
        self.consumer.assign(tps)
        await self.consumer.seek_to_end(*tps)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()
        await self.producer.stop()

    async def scatter(self, q: np.ndarray, top_k: int, domain: str | None) -> list[SearchReply]:
        """The replies of every shard that answered within 10 s, by partition."""
        rid = uuid.uuid4().hex
        spec = SearchSpec(query_id="q", vector=encode_vector(q), top_k=top_k, domain=domain,
                          all_access=True)
        for p in range(SEARCH_REQUESTS.partitions):
            req = SearchRequest(request_id=rid, partition=p, model_id=self.model, dim=self.dim,
                                deadline=time.time() + 10, queries=(spec,))
            await self.producer.send_and_wait(SEARCH_REQUESTS.name, encode(req),
                                              key=rid.encode(), partition=p)
        replies: dict[int, SearchReply] = {}
        deadline = time.monotonic() + 10
        while len(replies) < SEARCH_REQUESTS.partitions and time.monotonic() < deadline:
            for records in (await self.consumer.getmany(timeout_ms=200)).values():
                for r in records:
                    reply = decode(SearchReply, r.value)
                    if reply.request_id == rid:
                        replies.setdefault(reply.partition, reply)
        return [replies[p] for p in sorted(replies)]
