"""Scatter queries to every retrieval shard over Kafka and gather the replies.

Queries asked in the same event-loop turn (the query encoder's batcher releases a whole
batch of question vectors at once) leave together, up to `max_batch`: one SearchRequest
per shard carries them all, so a batch of questions costs each shard one message and one
reply, not one per question. Nothing waits to fill a batch; a lone query leaves alone.

Requests go to search.requests.v1 at an explicit partition, one per shard. Replies are
read with a group-less consumer assigned every partition of search.replies.v1, so every
inference instance sees every reply and keeps only its own request ids; no rebalance
ever stalls a query, and instances scale without coordination.

One-process mode: when this process's retrieval shards can answer every partition
(shared/worker/local_search.py), a query asks them directly and skips the broker round trip; the
same requests, replies and merge as above, so the answer is the same. Otherwise (another
process holds the shards, a partial assignment, a rebalance, a shard still recovering), or
with `local=False`, it goes through the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from services.inference.search.gather import Gather, GatherResult, split_reply
from services.inference.search.scatter import SearchQuery, build_requests
from shared.contract.codec import decode, encode
from shared.contract.records import SearchReply, SearchRequest
from shared.contract.topics import INFERENCE_APP, SEARCH_REPLIES, SEARCH_REQUESTS, TopicSpec
from shared.errors import InfrastructureError, InvalidInput
from shared.settings import KafkaSettings
from shared.tracing import context, spans
from shared.worker import local_search

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Waiter:
    """One query between search() and its result."""

    query_id: str
    query: SearchQuery
    gather: Gather
    deadline: float  # time.time() after which its caller stops waiting
    done: asyncio.Event = field(default_factory=asyncio.Event)
    request_id: str = ""  # the batch it left in; "" while still queued
    failure: BaseException | None = None
    span: Any = None  # the query's span (its gRPC call's) when tracing is on


def _result(gather: Gather, query: SearchQuery) -> GatherResult:
    """The merged top k, fused when the query carried its text (hybrid), on either path."""
    return gather.result(query.top_k, query.fusion if query.text else None)


class SearchClient:
    def __init__(self, kafka: KafkaSettings, *, requests: TopicSpec = SEARCH_REQUESTS,
                 replies: TopicSpec = SEARCH_REPLIES, client_id: str = INFERENCE_APP,
                 max_batch: int = 16, local: bool = True,
                 on_search: Callable[[str], None] | None = None) -> None:
        self._kafka, self._requests, self._replies = kafka, requests, replies
        self._client_id, self._max_batch, self._local = client_id, max_batch, local
        self.paths: Counter[str] = Counter()  # searches by path: "local", "broker"
        self._on_search = on_search  # told each search's path (the metrics)
        self._queued: list[_Waiter] = []
        self._batches: dict[str, dict[str, _Waiter]] = {}  # request id -> waiters by query id
        self._flush_soon: asyncio.Handle | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self.sent_batches: list[int] = []  # queries per request sent, newest last (tests, bench)
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        # (request id, shard) -> the span of that shard's request, until its reply comes
        # (tracing on only).
        self._shard_spans: dict[tuple[str, int], Any] = {}
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
            linger_ms=self._kafka.producer_linger_ms, **self._kafka.producer_options(),
            **self._kafka.client_options())
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._kafka.bootstrap, client_id=self._client_id, group_id=None,
            enable_auto_commit=False, auto_offset_reset="latest",
            fetch_max_wait_ms=self._kafka.query_fetch_max_wait_ms,
            **self._kafka.client_options())
        await self._producer.start()
        await self._consumer.start()
        tps = [TopicPartition(self._replies.name, p) for p in range(self._replies.partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_end(*tps)
        # seek_to_end is lazy; resolve it now, or the replies to the first request could
        # land before an "end" looked up later and be skipped.
        for tp in tps:
            await self._consumer.position(tp)
        self._reader = asyncio.create_task(self._read(), name="search-replies-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            # Its own failure, if any, was logged where it happened.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for waiter in [*self._queued, *(w for b in self._batches.values() for w in b.values())]:
            waiter.done.set()  # waiting queries return now, partial, instead of at their deadline
        if self._flush_soon is not None:
            self._flush_soon.cancel()
        for task in list(self._sends):
            task.cancel()
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()

    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult:
        """The merged top k from the shards that answered within `timeout_s`."""
        if not self.ready:
            raise InfrastructureError("the search client is not running")
        local = local_search.lookup() if self._local else None
        if local is not None:
            result = await self._search_local(local, query, timeout_s)
            if result is not None:
                return result
        self._count("broker")
        waiter = _Waiter(uuid.uuid4().hex, query, Gather(self.partitions),
                         time.time() + timeout_s, span=spans.current_span())
        self._queued.append(waiter)
        if len(self._queued) >= self._max_batch:
            self._flush()
        elif self._flush_soon is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._flush)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter.done.wait()
        except TimeoutError:
            pass  # the deadline passed: answer with the shards that made it
        finally:
            self._forget(waiter)
        if waiter.failure is not None:
            raise InfrastructureError(f"could not send search requests: {waiter.failure}")
        return _result(waiter.gather, query)

    def generation(self) -> Hashable | None:
        """The in-process shards' generation now (every partition); None when the next
        search would not be answered in-process."""
        local = local_search.lookup() if self._local else None
        return None if local is None else local.generation(range(self.partitions))

    async def _search_local(self, local: local_search.LocalSearch,
                            query: SearchQuery, timeout_s: float) -> GatherResult | None:
        """The merged top k from this process's shards; None when they cannot answer all."""
        query_id = uuid.uuid4().hex
        requests = build_requests([(query_id, query)], uuid.uuid4().hex, self.partitions,
                                  time.time() + timeout_s)
        shard_spans = [self._shard_span(r, spans.current_span(), (), "local")[0]
                       for r in requests] if spans.ENABLED else []
        partitions = range(self.partitions)
        before = local.generation(partitions)
        replies = await local.answer(requests)
        # The shards answer one per event-loop turn: equal generations on both sides mean
        # every part came from one unchanged state.
        same = before is not None and before == local.generation(partitions)
        for span in shard_spans:
            spans.finish(span, answered=replies is not None)
        if replies is None:
            return None
        gather = Gather(self.partitions)
        for reply in replies:
            gather.add(split_reply(reply, [query_id])[query_id])
        self._count("local")
        return replace(_result(gather, query), generation=before if same else None)

    def _count(self, path: str) -> None:
        self.paths[path] += 1
        if self._on_search is not None:
            self._on_search(path)

    def _flush(self) -> None:
        """Send everything queued, `max_batch` queries (of one model) per request."""
        self._flush_soon = None
        queued, self._queued = self._queued, []
        by_model: dict[tuple[str, int], list[_Waiter]] = {}
        for waiter in queued:
            by_model.setdefault((waiter.query.model_id, waiter.query.dim), []).append(waiter)
        for waiters in by_model.values():
            for i in range(0, len(waiters), self._max_batch):
                self._send(waiters[i : i + self._max_batch])

    def _send(self, waiters: list[_Waiter]) -> None:
        request_id = uuid.uuid4().hex
        # Registered before sending: a reply can beat the producer's ack.
        self._batches[request_id] = {w.query_id: w for w in waiters}
        for w in waiters:
            w.request_id = request_id
        self.sent_batches.append(len(waiters))
        requests = build_requests([(w.query_id, w.query) for w in waiters], request_id,
                                  self.partitions, max(w.deadline for w in waiters))
        task = asyncio.create_task(self._scatter(requests, waiters))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    def _shard_span(self, request: SearchRequest, parent: Any, links: Iterable[Any],
                    path: str) -> tuple[Any, list[tuple[str, bytes]] | None]:
        """A span for one shard's part of a scatter (child of the first query's span,
        linked to the others'), and the headers that carry it to the shard."""
        span, pair = spans.start_client(
            f"search shard {request.partition}",
            {"messaging.system": "kafka", "messaging.destination.name": self._requests.name,
             "messaging.destination.partition.id": str(request.partition),
             "streamrag.request_id": request.request_id, "streamrag.path": path,
             "streamrag.queries": len(request.queries)}, parent, links)
        return span, (context.with_trace([], pair) if pair is not None else None)

    async def _scatter(self, requests: list[SearchRequest], waiters: list[_Waiter]) -> None:
        assert self._producer is not None
        parent = next((w.span for w in waiters if w.span is not None), None)
        links = [spans.span_link(w.span) for w in waiters
                 if w.span is not None and w.span is not parent]
        try:
            sent = []
            for r in requests:
                headers = None
                if spans.ENABLED:
                    span, headers = self._shard_span(r, parent, links, "broker")
                    self._shard_spans[(r.request_id, r.partition)] = span
                sent.append(await self._producer.send(
                    self._requests.name, encode(r), key=r.request_id.encode(),
                    partition=r.partition, headers=headers))
            await asyncio.gather(*sent)
        except KafkaError as exc:
            for w in waiters:
                w.failure = exc
                w.done.set()

    def _forget(self, waiter: _Waiter) -> None:
        if not waiter.request_id:
            self._queued.remove(waiter)  # it never left (stopped, or its caller went away)
            return
        batch = self._batches.get(waiter.request_id, {})
        batch.pop(waiter.query_id, None)
        if not batch:
            self._batches.pop(waiter.request_id, None)
            if self._shard_spans:  # shards that never answered this request
                for shard in range(self.partitions):
                    spans.finish(self._shard_spans.pop((waiter.request_id, shard), None),
                                 answered=False)

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
        if key is not None and key.decode("utf-8", "replace") not in self._batches:
            return
        try:
            reply = decode(SearchReply, value)
        except InvalidInput as exc:
            log.warning("unreadable search reply skipped: %s", exc)
            return
        if self._shard_spans:
            spans.finish(self._shard_spans.pop((reply.request_id, reply.partition), None),
                         answered=not reply.error, error=reply.error or None)
        batch = self._batches.get(reply.request_id)
        if batch is None:
            return
        for query_id, answer in split_reply(reply, list(batch)).items():
            waiter = batch[query_id]
            if waiter.gather.add(answer):
                waiter.done.set()
