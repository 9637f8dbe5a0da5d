"""Fakes for the inference tests: a word-hashing encoder and an in-memory shard set."""

from __future__ import annotations

import asyncio
import re
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar
from unittest.mock import AsyncMock, patch

import numpy as np

from services.inference.answer import modes
from services.inference.answer.modes import GeneratorLoad
from services.inference.answer.result import Answer
from services.inference.search.gather import Gather, GatherResult, ShardAnswer
from services.inference.search.scatter import SearchQuery
from shared.contract.records import SearchHit

DIM = 64
T = TypeVar("T")


async def drive_agent(agents: Any, agent: Any, values: Sequence[bytes], read: Callable[[], T],
                      ) -> tuple[T, AsyncMock]:
    """Put `values` through one of the agents of `agents` (an inference stage, built by
    tests.support.built.stage) under Faust's test context; what `read()` returns while the
    context is open, and the dead-letter sender's mock."""
    agents.app.finalize()
    agents.app.flow_control.resume()
    dead = AsyncMock()
    with patch.object(agents.deadletters, "send", dead):
        async with agent.test_context() as running:
            for value in values:
                await running.put(value=value, key=b"k", timestamp=time.time())
            return read(), dead


class WordEncoder:
    """Bag of words hashed into DIM buckets: texts sharing words get a high cosine."""

    model_id = "fake/words"
    dim = DIM
    device = "cpu"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, zlib.crc32(word.encode()) % DIM] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


def hit(chunk_id: str, score: float, text: str = "", doc_id: str = "doc") -> SearchHit:
    return SearchHit(chunk_id=chunk_id, doc_id=doc_id, version=1, score=score,
                     event_time=1_700_000_000.0, text=text or f"text of {chunk_id}",
                     title="t", domain="d", source="s")



class GatedEncoder(WordEncoder):
    """Blocks inside encode (past the warm-up) until released: lets a test fill the
    batcher's queue."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def encode(self, texts: Any) -> Any:
        if texts != ["warm-up"]:
            self.gate.wait(5)
        return super().encode(texts)

class FakeSearch:
    """Shards answering from fixed hit lists; `silent` shards never reply, `failing` err."""

    def __init__(self, hits_by_shard: dict[int, list[SearchHit]], partitions: int = 4,
                 silent: frozenset[int] = frozenset(), failing: dict[int, str] | None = None,
                 ) -> None:
        self.hits_by_shard, self._partitions = hits_by_shard, partitions
        self.silent, self.failing = silent, failing or {}
        self.queries: list[tuple[SearchQuery, float]] = []
        self.started = self.stopped = False

    @property
    def ready(self) -> bool:
        return self.started and not self.stopped

    @property
    def partitions(self) -> int:
        return self._partitions

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult:
        self.queries.append((query, timeout_s))
        gather = Gather(self._partitions)
        for p in range(self._partitions):
            if p in self.silent:
                continue
            hits = sorted(self.hits_by_shard.get(p, []), key=lambda h: -h.score)[: query.top_k]
            gather.add(ShardAnswer(p, tuple(hits), self.failing.get(p, "")))
        if not gather.complete:
            await asyncio.sleep(timeout_s)  # like the real client: silent shards cost the wait
        return gather.result(query.top_k)


# Two services' facts in two passages: a generated answer can mix them up.
TAMARIN_CHUNKS = {
    0: [hit("c-ttl", 0.9, "Tamarin keeps cached pages for 35 days before eviction.",
            doc_id="tamarin")],
    1: [hit("c-timeout", 0.8, "The Osprey gateway times out a request after 20 seconds.",
            doc_id="osprey")]}


class ScriptedGenerator:
    """Stands in for the generative answerer: writes `text` over every passage."""

    def __init__(self, text: str, estimate_s: float = 0.5) -> None:
        self.text, self.estimate_s, self.lm = text, estimate_s, None

    rechecks = 0  # times auto quoted on the estimate and asked for it to be measured

    def recheck(self) -> None:
        self.rechecks += 1

    def load(self, params: Any) -> GeneratorLoad:
        return GeneratorLoad(overloaded=False, estimate_s=self.estimate_s)

    async def stream(self, params: Any, texts: Sequence[str]) -> AsyncIterator[str | Answer]:
        yield self.text
        yield Answer((self.text,), "stop", 10, 5, 1.0, mode=modes.GENERATIVE, unit="tokens",
                     shown=tuple(range(1, len(texts) + 1)))

    async def stop(self) -> None:
        pass
