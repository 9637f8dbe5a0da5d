"""SearchClient against the real broker, with a tiny shard responder written here."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from services.inference.gather import GatherResult, SearchQuery
from services.inference.search_client import SearchClient
from shared.admin import ensure_topics
from shared.codec import decode, encode
from shared.records import SearchHit, SearchReply, SearchRequest
from shared.settings import KafkaSettings
from shared.topics import SEARCH_REPLIES, SEARCH_REQUESTS, TopicSpec

pytestmark = pytest.mark.integration
KAFKA = KafkaSettings()


@pytest.fixture(autouse=True, scope="module")
def _kafka(broker: str) -> None:
    """Point this module at the session's real embedded broker."""
    global KAFKA
    KAFKA = KafkaSettings(bootstrap=broker)


def _hit(partition: int, n: int) -> SearchHit:
    score = round(0.9 - 0.01 * partition - 0.1 * n, 3)  # shards interleave
    return SearchHit(chunk_id=f"p{partition}-c{n}", doc_id=f"doc-{partition}", version=1,
                     score=score, event_time=time.time(), text="t", domain="d", source="s")


@contextlib.asynccontextmanager
async def topics() -> AsyncIterator[tuple[TopicSpec, TopicSpec]]:
    """Fresh request/reply topics, so a retrieval service on this broker cannot answer."""
    tag = uuid.uuid4().hex[:8]
    specs = (TopicSpec(f"test.{tag}.{SEARCH_REQUESTS.name}", "request id", "SearchRequest"),
             TopicSpec(f"test.{tag}.{SEARCH_REPLIES.name}", "request id", "SearchReply"))
    await ensure_topics(KAFKA, specs, wait_s=10)
    try:
        yield specs
    finally:
        admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA.bootstrap)
        await admin.start()
        with contextlib.suppress(Exception):  # best effort: the topics expire anyway
            await admin.delete_topics([s.name for s in specs])
        await admin.close()


async def respond(requests: TopicSpec, replies: TopicSpec, answering: set[int]) -> None:
    """A stand-in for retrieval: plain aiokafka, answering only the shards in `answering`."""
    consumer = AIOKafkaConsumer(bootstrap_servers=KAFKA.bootstrap, group_id=None,
                                auto_offset_reset="earliest",
                                fetch_max_wait_ms=KAFKA.fetch_max_wait_ms)
    producer = AIOKafkaProducer(bootstrap_servers=KAFKA.bootstrap)
    await consumer.start()
    await producer.start()
    consumer.assign([TopicPartition(requests.name, p) for p in range(requests.partitions)])
    try:
        async for message in consumer:
            req = decode(SearchRequest, message.value)
            if message.partition not in answering:
                continue
            error = "" if message.partition == req.partition else "wrong_partition"
            hits = tuple(_hit(req.partition, n) for n in range(req.top_k))
            reply = SearchReply(request_id=req.request_id, partition=req.partition, hits=hits,
                                shard_size=req.top_k, error=error)
            await producer.send_and_wait(replies.name, encode(reply),
                                         key=req.request_id.encode())
    finally:
        await consumer.stop()
        await producer.stop()


async def search_with(answering: set[int], timeout_s: float, clients: int = 1,
                      ) -> list[tuple[GatherResult, float]]:
    async with topics() as (requests, replies):
        responder = asyncio.create_task(respond(requests, replies, answering))
        started = [SearchClient(KAFKA, requests=requests, replies=replies)
                   for _ in range(clients)]
        for client in started:
            await client.start()
        try:
            query = SearchQuery(np.ones(8, dtype=np.float32), "m", 8, top_k=3)

            async def one(client: SearchClient) -> tuple[GatherResult, float]:
                t0 = time.monotonic()
                result = await client.search(query, timeout_s)
                return result, time.monotonic() - t0
            return list(await asyncio.gather(*(one(c) for c in started)))
        finally:
            responder.cancel()
            for client in started:
                await client.stop()


def test_full_gather_merges_every_shard_and_finishes_early() -> None:
    results = asyncio.run(search_with({0, 1, 2, 3}, timeout_s=10.0, clients=2))
    for result, elapsed in results:  # two instances each see only, and all, their replies
        assert (result.answered, result.missing, dict(result.errors)) == ((0, 1, 2, 3), (), {})
        assert [h.chunk_id for h in result.hits] == ["p0-c0", "p1-c0", "p2-c0"]
        assert not result.partial
        assert elapsed < 5.0  # completes on the last reply, not at the deadline


def test_partial_gather_names_the_missing_shards_at_the_deadline() -> None:
    [(result, elapsed)] = asyncio.run(search_with({0, 2}, timeout_s=1.5))
    assert (result.answered, result.missing) == ((0, 2), (1, 3))
    assert result.partial and result.unanswered == (1, 3)
    assert [h.chunk_id for h in result.hits] == ["p0-c0", "p2-c0", "p0-c1"]
    assert 1.4 <= elapsed < 4.0  # waited out the deadline, then returned: never a hang
