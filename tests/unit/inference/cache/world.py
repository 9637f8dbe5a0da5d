"""A small world for the answer cache tests: an index of documents that change, searched
in-process (through the real SearchClient and a registered LocalSearch) or "by broker"
(no generation known), a cached engine and an uncached oracle engine over it. Each
document has access labels; every search returns only what its asker's Access admits,
as the shards' filter does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from services.inference.answer.result import Answer
from services.inference.cache.serve import CachedQueries, Lookup, no_generation
from services.inference.engine import QueryEngine, Retrieval
from services.inference.query import parse_params
from services.inference.search.client import SearchClient
from services.inference.search.gather import Gather, GatherResult, ShardAnswer
from services.inference.search.scatter import SearchQuery
from services.inference.settings import InferenceSettings
from shared.contract.access import PUBLIC, Access
from shared.contract.records import (
    QueryHits,
    SearchHit,
    SearchReply,
    SearchRequest,
    decode_vector,
)
from shared.contract.topics import SEARCH_REQUESTS
from shared.settings import KafkaSettings
from shared.worker import local_search
from tests.unit.inference.fakes import WordEncoder

PARTITIONS = 3
EVERYTHING = Access.everything()
NOW = 1_700_000_000.0


class Index:
    """One chunk per document, document i on partition i % PARTITIONS; every change bumps
    the generation, as retrieval's Shards does. `pending` changes are made between two
    shards' reads of the next search (an update landing mid-search)."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[int, str]] = {}
        self.acls: dict[str, tuple[str, ...]] = {}
        self.versions: dict[str, int] = {}
        self.generation = 0
        self.pending: list[Callable[[], None]] = []
        self.changed_mid_search = False
        self._encoder = WordEncoder()

    def upsert(self, doc: str, text: str, acl: tuple[str, ...] = (PUBLIC,)) -> None:
        self.versions[doc] = self.versions.get(doc, 0) + 1
        self.docs[doc] = (self.versions[doc], text)
        self.acls[doc] = acl
        self.generation += 1

    def delete(self, doc: str) -> None:
        self.versions[doc] = self.versions.get(doc, 0) + 1
        self.docs.pop(doc, None)
        self.generation += 1

    def shard_hits(self, partition: int, vector: np.ndarray, top_k: int, access: Access,
                   ) -> tuple[SearchHit, ...]:
        docs = sorted(d for d in self.docs if int(d[1:]) % PARTITIONS == partition
                      and access.admits(self.acls[d]))
        if not docs:
            return ()
        texts = [self.docs[d][1] for d in docs]
        scores = self._encoder.encode(texts) @ vector
        hits = [SearchHit(chunk_id=f"{d}#0", doc_id=d, version=self.docs[d][0],
                          score=float(s), event_time=NOW, text=t, title="", domain="d",
                          source="s", acl=self.acls[d])
                for d, t, s in zip(docs, texts, scores, strict=True)]
        return tuple(sorted(hits, key=lambda h: (-h.score, h.chunk_id))[:top_k])

    def between_shards(self) -> None:
        while self.pending:
            self.pending.pop(0)()
            self.changed_mid_search = True


class InProcess:
    """The retrieval shards of this process, as LocalShards offers them."""

    def __init__(self, index: Index) -> None:
        self.index = index

    def generation(self, partitions: Sequence[int]) -> tuple[str, int]:
        return "index", self.index.generation

    async def answer(self, requests: Sequence[SearchRequest]) -> list[SearchReply]:
        replies = []
        for i, r in enumerate(requests):
            if i:
                await asyncio.sleep(0)
                self.index.between_shards()
            replies.append(SearchReply(request_id=r.request_id, partition=r.partition,
                                       results=tuple(QueryHits(query_id=q.query_id, hits=(
                                           self.index.shard_hits(
                                               r.partition, decode_vector(q.vector), q.top_k,
                                               Access(frozenset(q.groups), q.all_access))))
                                                     for q in r.queries)))
        return replies


class ByBroker:
    """Shards in other processes: the same answers, and no generation is ever known."""

    def __init__(self, index: Index, pausing: bool = True) -> None:
        self.index, self.pausing = index, pausing

    @property
    def ready(self) -> bool:
        return True

    @property
    def partitions(self) -> int:
        return PARTITIONS

    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult:
        gather = Gather(PARTITIONS)
        for p in range(PARTITIONS):
            if p and self.pausing:
                await asyncio.sleep(0)
                self.index.between_shards()
            gather.add(ShardAnswer(p, self.index.shard_hits(p, query.vector, query.top_k,
                                                            query.access)))
        return gather.result(query.top_k)


def in_process_client() -> SearchClient:
    client = SearchClient(KafkaSettings(), requests=replace(SEARCH_REQUESTS,
                                                           count=PARTITIONS), local=True)
    client._reader = asyncio.get_running_loop().create_future()  # type: ignore[assignment]
    return client


class Clicks:
    """The feedback view: clicks per chunk."""

    def __init__(self) -> None:
        self.clicks: dict[str, int] = {}

    def counts(self, chunk_id: str) -> tuple[int, int]:
        return self.clicks.get(chunk_id, 0), 0


@dataclass
class World:
    index: Index
    clicks: Clicks
    cached: CachedQueries
    oracle: QueryEngine
    clock: list[float]

    async def ask(self, question: str, top_k: int = 2, access: Access = EVERYTHING,
                  ) -> tuple[Lookup, Answer]:
        """A Query as the server runs it (services/inference/api/server.py)."""
        params = parse_params(self.cached.engine.settings, question=question, top_k=top_k,
                              now=NOW, access=access)
        engine = self.cached.engine
        found = await self.cached.query(params, 1.0)
        if found.choice is not None and found.answer is not None:
            return found, found.answer
        choice = engine.choose_mode(params, None)
        answer = await engine.answer(found.retrieval, choice)
        self.cached.store_answer(found, choice, answer)
        return found, answer

    async def truth(self, question: str, top_k: int = 2, access: Access = EVERYTHING,
                    ) -> tuple[Retrieval, Answer]:
        """The uncached answer of the index as it is now (nothing changes meanwhile)."""
        params = parse_params(self.oracle.settings, question=question, top_k=top_k, now=NOW,
                              access=access)
        held, self.index.pending = self.index.pending, []
        try:
            retrieval = await self.oracle.retrieve(params, 1.0)
            return retrieval, await self.oracle.answer(retrieval)
        finally:
            self.index.pending = held

    async def answer_of(self, retrieval: Retrieval) -> Answer:
        """The uncached answer to exactly these hits."""
        return await self.oracle.answer(retrieval)


def view(retrieval: Retrieval, answer: Answer) -> tuple[Any, ...]:
    """What a caller sees of an answer: its text and its citations."""
    return answer.text, tuple((h.chunk_id, h.doc_id, h.version, h.score, h.text)
                              for h in retrieval.result.hits)


@asynccontextmanager
async def world(in_process: bool, *, size: int = 64, ttl_s: float = 300.0,
                **settings: Any) -> AsyncIterator[World]:
    index, clicks, clock = Index(), Clicks(), [0.0]
    s = InferenceSettings(answer_cache_size=size, answer_cache_ttl_s=ttl_s, hybrid=False,
                          generator_bundled=False, **settings)
    search: Any = in_process_client() if in_process else ByBroker(index)
    previous = local_search.lookup()
    local_search.register(InProcess(index) if in_process else None)
    engine = QueryEngine(s, search, encoder=WordEncoder(), feedback=clicks)
    oracle = QueryEngine(s, ByBroker(index, pausing=False), encoder=WordEncoder(),
                         feedback=clicks)
    generation = search.generation if in_process else no_generation
    cached = CachedQueries(engine, generation, clock=lambda: clock[0])
    engine.start()
    oracle.start()
    try:
        yield World(index, clicks, cached, oracle, clock)
    finally:
        local_search.register(previous)
        await engine.stop()
        await oracle.stop()
        if in_process:
            search._reader.cancel()
