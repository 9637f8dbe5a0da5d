"""Scatter a query to every retrieval shard over Kafka and gather the replies.

Requests go to search.requests.v1 at an explicit partition, one per shard. Replies are
read with a group-less consumer assigned every partition of search.replies.v1, so every
inference instance sees every reply and keeps only its own request ids; no rebalance
ever stalls a query, and instances scale without coordination.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from services.inference.gather import Gather, GatherResult, SearchQuery, build_requests
from shared.codec import decode, encode
from shared.errors import InfrastructureError, InvalidInput
from shared.records import SearchReply, SearchRequest
from shared.settings import KafkaSettings
from shared.topics import INFERENCE_APP, SEARCH_REPLIES, SEARCH_REQUESTS, TopicSpec

log = logging.getLogger(__name__)


class SearchClient:
    def __init__(self, kafka: KafkaSettings, *, requests: TopicSpec = SEARCH_REQUESTS,
                 replies: TopicSpec = SEARCH_REPLIES, client_id: str = INFERENCE_APP) -> None:
        self._kafka, self._requests, self._replies = kafka, requests, replies
        self._client_id = client_id
        self._pending: dict[str, tuple[Gather, asyncio.Event]] = {}
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def partitions(self) -> int:
        return self._requests.partitions

    @property
    def ready(self) -> bool:
        """True once the reply consumer is positioned and still reading."""
        return self._reader is not None and not self._reader.done()

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._kafka.bootstrap, client_id=self._client_id,
            linger_ms=self._kafka.producer_linger_ms)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._kafka.bootstrap, client_id=self._client_id, group_id=None,
            enable_auto_commit=False, auto_offset_reset="latest",
            fetch_max_wait_ms=self._kafka.fetch_max_wait_ms)
        await self._producer.start()
        await self._consumer.start()
        tps = [TopicPartition(self._replies.name, p) for p in range(self._replies.partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_end(*tps)
        # seek_to_end is lazy; resolve it now, or the replies to the first request could
        # land before an "end" looked up later and be skipped. (The embedded broker may
        # answer an end a little early; the old replies read then match no pending id.)
        for tp in tps:
            await self._consumer.position(tp)
        self._reader = asyncio.create_task(self._read(), name="search-replies-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            # Its own failure, if any, was logged where it happened.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for _, done in self._pending.values():
            done.set()  # waiting queries return now, partial, instead of at their deadline
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()

    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult:
        """The merged top k from the shards that answered within `timeout_s`."""
        if not self.ready:
            raise InfrastructureError("the search client is not running")
        request_id = uuid.uuid4().hex
        gather, done = Gather(request_id, self.partitions), asyncio.Event()
        self._pending[request_id] = (gather, done)  # before sending: a reply can beat the ack
        try:
            async with asyncio.timeout(timeout_s):
                deadline = time.time() + timeout_s
                await self._scatter(build_requests(query, request_id, self.partitions, deadline))
                await done.wait()
        except TimeoutError:
            pass  # the deadline passed: answer with the shards that made it
        finally:
            del self._pending[request_id]
        return gather.result(query.top_k)

    async def _scatter(self, requests: list[SearchRequest]) -> None:
        assert self._producer is not None
        try:
            sent = [await self._producer.send(self._requests.name, encode(r),
                                              key=r.request_id.encode(), partition=r.partition)
                    for r in requests]
            await asyncio.gather(*sent)
        except KafkaError as exc:
            raise InfrastructureError(f"could not send search requests: {exc}") from exc

    async def _read(self) -> None:
        assert self._consumer is not None
        try:
            async for message in self._consumer:
                self._deliver(message.key, message.value)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("search reply reader stopped; queries will fail until restart")
            raise

    def _deliver(self, key: bytes | None, value: bytes | None) -> None:
        # Every instance sees every reply: skip others' by key before parsing the JSON.
        if key is not None and key.decode("utf-8", "replace") not in self._pending:
            return
        try:
            reply = decode(SearchReply, value)
        except InvalidInput as exc:
            log.warning("unreadable search reply skipped: %s", exc)
            return
        entry = self._pending.get(reply.request_id)
        if entry is not None and entry[0].add(reply):
            entry[1].set()
