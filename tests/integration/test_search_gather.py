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

from services.inference.search.client import SearchClient
from services.inference.search.gather import GatherResult
from services.inference.search.scatter import SearchQuery
from shared.contract.access import Access
from shared.contract.codec import decode, encode
from shared.contract.records import QueryHits, SearchHit, SearchReply, SearchRequest, decode_vector
from shared.contract.topics import SEARCH_REPLIES, SEARCH_REQUESTS, TopicSpec
from shared.kafka.admin import ensure_topics
from shared.settings import KafkaSettings

pytestmark = pytest.mark.integration
KAFKA = KafkaSettings()
HANG_S = 60.0  # a search still running after this is hung


@pytest.fixture(autouse=True, scope="module")
def _kafka(broker: str) -> None:
    """Point this module at the session's real embedded broker."""
    global KAFKA
    KAFKA = KafkaSettings(bootstrap=broker)


def _hit(partition: int, n: int, text: str = "t") -> SearchHit:
    score = round(0.9 - 0.01 * partition - 0.1 * n, 3)  # shards interleave
    return SearchHit(chunk_id=f"p{partition}-c{n}", doc_id=f"doc-{partition}", version=1,
                     score=score, event_time=time.time(), text=text, domain="d", source="s")


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


async def respond(requests: TopicSpec, replies: TopicSpec, answering: set[int],
                  batches: list[int] | None = None) -> None:
    """A stand-in for retrieval: plain aiokafka, answering only the shards in `answering`.

    Each query's hits carry its vector's first component as their text, so a test can
    see that every query got its own results; `batches` collects queries per request."""
    consumer = AIOKafkaConsumer(bootstrap_servers=KAFKA.bootstrap, group_id=None,
                                auto_offset_reset="earliest",
                                fetch_max_wait_ms=KAFKA.query_fetch_max_wait_ms)
    producer = AIOKafkaProducer(bootstrap_servers=KAFKA.bootstrap)
    await consumer.start()
    await producer.start()
    consumer.assign([TopicPartition(requests.name, p) for p in range(requests.partitions)])
    try:
        async for message in consumer:
            req = decode(SearchRequest, message.value)
            if message.partition not in answering:
                continue
            if batches is not None and req.partition == 0:
                batches.append(len(req.queries))
            error = "" if message.partition == req.partition else "wrong_partition"
            results = tuple(
                QueryHits(query_id=q.query_id, hits=tuple(
                    _hit(req.partition, n, f"q{decode_vector(q.vector)[0]:g}")
                    for n in range(q.top_k)))
                for q in req.queries)
            reply = SearchReply(request_id=req.request_id, partition=req.partition,
                                results=results, shard_size=9, error=error)
            await producer.send_and_wait(replies.name, encode(reply),
                                         key=req.request_id.encode())
    finally:
        await consumer.stop()
        await producer.stop()


async def search_with(answering: set[int], timeout_s: float, clients: int = 1,
                      ) -> list[GatherResult]:
    async with topics() as (requests, replies):
        responder = asyncio.create_task(respond(requests, replies, answering))
        started = [SearchClient(KAFKA, requests=requests, replies=replies)
                   for _ in range(clients)]
        for client in started:
            await client.start()
        try:
            query = SearchQuery(np.ones(8, dtype=np.float32), "m", 8, top_k=3,
                                access=Access.everything())

            # The test's own bound (a hang fails here, naming it), never the search's deadline.
            async with asyncio.timeout(HANG_S):
                return list(await asyncio.gather(*(c.search(query, timeout_s)
                                                   for c in started)))
        finally:
            responder.cancel()
            for client in started:
                await client.stop()


def test_full_gather_merges_every_shard_and_finishes_early() -> None:
    # A deadline far beyond the test's own bound: returning at all means the gather ended
    # on the last reply, not at the deadline.
    results = asyncio.run(search_with({0, 1, 2, 3}, timeout_s=10 * HANG_S, clients=2))
    for result in results:  # two instances each see only, and all, their replies
        assert (result.answered, result.missing, dict(result.errors)) == ((0, 1, 2, 3), (), {})
        assert [h.chunk_id for h in result.hits] == ["p0-c0", "p1-c0", "p2-c0"]
        assert not result.partial


def test_partial_gather_names_the_missing_shards_at_the_deadline() -> None:
    # Shards 1 and 3 never answer: only the deadline can end this search (within HANG_S).
    [result] = asyncio.run(search_with({0, 2}, timeout_s=1.5))
    assert (result.answered, result.missing) == ((0, 2), (1, 3))
    assert result.partial and result.unanswered == (1, 3)
    assert [h.chunk_id for h in result.hits] == ["p0-c0", "p2-c0", "p0-c1"]


@pytest.mark.parametrize(("max_batch", "expected"), [(16, [5]), (2, [2, 2, 1]), (1, [1] * 5)])
def test_queries_asked_together_share_one_request_per_shard(max_batch: int,
                                                             expected: list[int]) -> None:
    async def go() -> tuple[list[GatherResult], list[int]]:
        batches: list[int] = []
        async with topics() as (requests, replies):
            responder = asyncio.create_task(respond(requests, replies, {0, 1, 2, 3}, batches))
            client = SearchClient(KAFKA, requests=requests, replies=replies,
                                  max_batch=max_batch)
            await client.start()
            try:
                queries = [SearchQuery(np.full(8, i, dtype=np.float32), "m", 8, top_k=2,
                                       access=Access.everything())
                           for i in range(5)]
                results = await asyncio.gather(*(client.search(q, 10.0) for q in queries))
            finally:
                responder.cancel()
                await client.stop()
            assert client.sent_batches == expected
            return list(results), batches
    results, batches = asyncio.run(go())
    assert sorted(batches) == sorted(expected)  # what shard 0 actually received
    for i, result in enumerate(results):
        assert (result.answered, result.partial) == ((0, 1, 2, 3), False)
        assert {h.text for h in result.hits} == {f"q{i}"}, i  # its own hits, no one else's
        assert [h.chunk_id for h in result.hits] == ["p0-c0", "p1-c0"]
