"""SearchClient's path choice: this process's shards when they answer, the broker otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from services.inference.search.client import SearchClient
from services.inference.search.gather import GatherResult
from services.inference.search.scatter import SearchQuery
from shared.contract.access import Access
from shared.contract.records import QueryHits, SearchHit, SearchReply, SearchRequest
from shared.settings import KafkaSettings
from shared.worker import local_search

QUERY = SearchQuery(vector=np.ones(4, dtype="float32") / 2, model_id="m", dim=4, top_k=2,
                    access=Access.everything())


def hit(chunk: str, score: float) -> SearchHit:
    return SearchHit(chunk_id=chunk, doc_id=chunk.split("#")[0], version=1, score=score,
                     event_time=1.0, text="t", title="", domain="d", source="s")


class FakeShards:
    """Each partition p holds chunk p#0 scoring p/10 (and p#1 scoring p/100)."""

    def __init__(self, can_answer: bool) -> None:
        self.can_answer = can_answer
        self.asked: list[SearchRequest] = []

    def generation(self, partitions: Sequence[int]) -> int | None:
        return 7 if self.can_answer else None

    async def answer(self, requests: Sequence[SearchRequest]) -> list[SearchReply] | None:
        self.asked.extend(requests)
        if not self.can_answer:
            return None
        return [SearchReply(request_id=r.request_id, partition=r.partition, results=tuple(
            QueryHits(query_id=q.query_id, hits=(hit(f"{r.partition}#0", r.partition / 10),
                                                 hit(f"{r.partition}#1", r.partition / 100)))
            for q in r.queries)) for r in requests]


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[int] = []

    async def send(self, topic: str, value: bytes, *, key: bytes, partition: int,
                   headers: Any = None) -> Any:
        self.sent.append(partition)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def search(local: FakeShards | None, *, enabled: bool = True, query: SearchQuery = QUERY,
           ) -> tuple[GatherResult, SearchClient, FakeProducer]:
    async def go() -> tuple[GatherResult, SearchClient, FakeProducer]:
        client = SearchClient(KafkaSettings(), local=enabled)
        producer = FakeProducer()
        client._producer = producer
        reader = asyncio.get_running_loop().create_future()  # a reader still running
        client._reader = reader  # type: ignore[assignment]
        try:
            return await client.search(query, timeout_s=0.05), client, producer
        finally:
            reader.cancel()
    return asyncio.run(go())


@pytest.fixture(autouse=True)
def no_registered_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_search, "_registered", None)


def test_shards_in_this_process_answer_without_the_broker() -> None:
    shards = FakeShards(can_answer=True)
    local_search.register(shards)
    result, client, producer = search(shards)
    assert [(h.chunk_id, h.score) for h in result.hits] == [("3#0", 0.3), ("2#0", 0.2)]
    assert result.answered == (0, 1, 2, 3) and not result.partial
    assert sorted(r.partition for r in shards.asked) == list(range(client.partitions))
    assert client.paths == {"local": 1}
    assert producer.sent == [] and client.sent_batches == []


def test_the_in_process_path_asks_every_shard_with_the_callers_access() -> None:
    shards = FakeShards(can_answer=True)
    local_search.register(shards)
    ann = replace(QUERY, access=Access.of("ann", ["payments"]))
    search(shards, query=ann)
    assert {(q.groups, q.all_access) for r in shards.asked for q in r.queries} == {
        (("payments", "public", "user:ann"), False)}
    assert len(shards.asked) == 4


def test_shards_that_cannot_answer_all_send_the_search_through_the_broker() -> None:
    shards = FakeShards(can_answer=False)
    local_search.register(shards)
    result, client, producer = search(shards)
    assert len(shards.asked) == client.partitions  # asked first, declined
    assert producer.sent == list(range(client.partitions))
    assert client.paths == {"broker": 1}
    assert result.missing == (0, 1, 2, 3)  # no shard replied over the (absent) broker


def test_no_shards_in_this_process_means_the_broker() -> None:
    result, client, producer = search(None)
    assert producer.sent == list(range(client.partitions))
    assert client.paths == {"broker": 1}


def test_the_setting_off_forces_the_broker() -> None:
    shards = FakeShards(can_answer=True)
    local_search.register(shards)
    _, client, producer = search(shards, enabled=False)
    assert shards.asked == []
    assert producer.sent == list(range(client.partitions))
    assert client.paths == {"broker": 1}


class ChangingShards(FakeShards):
    """Shards that apply an update between two shards' answers when `change` is set."""

    def __init__(self, change: bool) -> None:
        super().__init__(can_answer=True)
        self.change, self.gen = change, 1

    def generation(self, partitions: Sequence[int]) -> int | None:
        return self.gen

    async def answer(self, requests: Sequence[SearchRequest]) -> list[SearchReply] | None:
        replies = await super().answer(requests)
        if self.change:
            self.gen += 1
        return replies


def test_an_in_process_answer_carries_the_generation_it_is_exact_for() -> None:
    shards = ChangingShards(change=False)
    local_search.register(shards)
    result, client, _ = search(shards)
    assert result.generation == 1
    assert client.generation() == 1


def test_an_update_during_the_search_leaves_the_answer_without_a_generation() -> None:
    shards = ChangingShards(change=True)
    local_search.register(shards)
    result, _, _ = search(shards)
    assert result.hits and result.generation is None


def test_the_broker_path_knows_no_generation() -> None:
    shards = FakeShards(can_answer=False)
    local_search.register(shards)
    result, client, _ = search(shards)
    assert result.generation is None and client.generation() is None
