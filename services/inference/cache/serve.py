"""Query and Retrieve through the answer cache: when a stored answer may be served.

An answer depends on the question's key (key.py) and on the index the search read. A
stored one is served only
- at once ("hit"), when its retrieval came whole from this process's shards at a generation
  equal to theirs now (nothing applied, assigned or released since, so a search now would
  return the same hits) and the feedback boost still orders those hits as it did; or
- after a fresh search ("revalidated"), when that search returned exactly the stored hits
  (ids, versions, texts, scores): the answer is a function of them and the key.
Otherwise the call searches and answers afresh: "miss" (none stored), "expired" (older than
the TTL), "invalidated" (the fresh hits differ: the index changed what this question gets).
The argument in full: docs/design/cache.md.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, replace

from services.inference.answer.modes import EXTRACTIVE, ModeChoice
from services.inference.answer.result import Answer
from services.inference.cache.key import CacheKey, config_version, key_for
from services.inference.cache.store import AnswerStore, Entry
from services.inference.engine import QueryEngine, Retrieval
from services.inference.query import QueryParams

HIT, REVALIDATED, MISS, EXPIRED, INVALIDATED = "hit", "revalidated", "miss", "expired", \
    "invalidated"
OFF = "off"  # the cache is turned off
# Answers shaped by a passing moment (the generator busy, a short deadline) or cut short.
TRANSIENT_REASONS = frozenset({"overload", "deadline"})
Generation = Callable[[], Hashable | None]


@dataclass(frozen=True)
class Lookup:
    """A call's retrieval, and its answer when the cache had it."""

    key: CacheKey | None  # None with the cache off
    retrieval: Retrieval
    outcome: str
    choice: ModeChoice | None = None
    answer: Answer | None = None


def no_generation() -> Hashable | None:
    """For a server whose shards are never in-process: every hit is revalidated."""
    return None


class CachedQueries:
    def __init__(self, engine: QueryEngine, generation: Generation, *,
                 enabled: bool | None = None, clock: Callable[[], float] = time.monotonic,
                 ) -> None:
        s = engine.settings
        self.engine, self._generation = engine, generation
        self.enabled = s.answer_cache if enabled is None else enabled
        self.store = AnswerStore(s.answer_cache_size, s.answer_cache_kept_s, clock)
        # The settings' fingerprint; a query configuration applied at run time (config/)
        # sets config_version to it plus its version, and every entry of the old one is
        # never found again. The key adds the query's variant.
        self.settings_version = config_version(s.model_dump_json())
        self.config_version = self.settings_version
        self.metrics = engine.metrics

    async def query(self, params: QueryParams, budget_s: float) -> Lookup:
        """The call's retrieval (and answer, when current) for params.access's scope."""
        return await self._lookup("query", params, budget_s)

    async def retrieve(self, params: QueryParams, budget_s: float) -> Lookup:
        found = await self._lookup("retrieve", params, budget_s)
        self.store_answer(found)
        return found

    def store_answer(self, found: Lookup, choice: ModeChoice | None = None,
                     answer: Answer | None = None) -> None:
        """Keep a freshly made answer (a Retrieve's retrieval alone) if it may be reused."""
        if found.key is None or found.outcome in (HIT, REVALIDATED):
            return
        r = found.retrieval
        if r.result.partial or self._encoder_tag(r.encoder_epoch) != found.key.encoder:
            return  # shards missing, or the encoder switched during the call
        if answer is not None and not _reusable(r.params, choice, answer):
            return
        self.store.put(found.key, Entry(r, choice, answer))
        self.metrics.answer_cache_entries.set(len(self.store))

    async def _lookup(self, call: str, params: QueryParams, budget_s: float) -> Lookup:
        if not self.enabled:
            return Lookup(None, await self.engine.retrieve(params, budget_s), OFF)
        key = self._key(call, params)
        entry, expired = self.store.get(key)
        if entry is not None and self._current(entry):
            return self._counted(call, _served(key, entry, HIT))
        retrieval = await self.engine.retrieve(params, budget_s)
        if entry is None:
            return self._counted(call, Lookup(key, retrieval, EXPIRED if expired else MISS))
        if _same_hits(entry.retrieval, retrieval):
            # The same hits at a newer generation: the answer stands, and is current there.
            self.store.put(key, replace(entry, retrieval=retrieval), keep_age=True)
            return self._counted(call, _served(key, replace(entry, retrieval=retrieval),
                                               REVALIDATED, fresh=True))
        self.store.drop(key)
        return self._counted(call, Lookup(key, retrieval, INVALIDATED))

    def _current(self, entry: Entry) -> bool:
        """True when a search now would return the stored hits: same shard generation
        (read in the same event-loop step as the answer is taken) and feedback order."""
        r = entry.retrieval
        stored = r.result.generation
        if stored is None or stored != self._generation():
            return False
        return self.engine.feedback_order(r.params, r.candidates) == r.ranked

    def _key(self, call: str, params: QueryParams) -> CacheKey:
        e = self.engine
        exact_case = (call == "query" and e.generative is not None
                      and params.answer_mode != EXTRACTIVE)
        return key_for(call, params, encoder=self._encoder_tag(e.encoder_epoch),
                       config=self._config_tag(params),
                       exact_case=exact_case)

    def _config_tag(self, params: QueryParams) -> str:
        """The configuration the query is answered under: its version and variant when it
        was routed (so an answer in flight across a new version is kept under its own)."""
        served = params.served
        if served is None:
            return self.config_version
        return f"{self.settings_version}@{served.version}/{served.variant}"

    def _encoder_tag(self, epoch: int) -> str:
        encoder = self.engine.encoder
        return f"{encoder.model_id if encoder else ''}@{epoch}"

    def _counted(self, call: str, found: Lookup) -> Lookup:
        self.metrics.answer_cache.labels(call=call, outcome=found.outcome).inc()
        self.metrics.answer_cache_entries.set(len(self.store))
        return found


async def answer_events(answer: Answer) -> AsyncIterator[str | Answer]:
    """A cached answer as QueryEngine.answer_stream yields a fresh one."""
    for piece in answer.pieces:
        yield piece
    yield answer


def _served(key: CacheKey, entry: Entry, outcome: str, fresh: bool = False) -> Lookup:
    """The stored answer; its retrieval timed as done now (a hit searched nothing)."""
    r = entry.retrieval
    if not fresh:
        r = replace(r, started=time.perf_counter(), embed_ms=0.0, retrieval_ms=0.0,
                    rerank_ms=0.0)
    answer = None if entry.answer is None else replace(entry.answer, answer_ms=0.0)
    return Lookup(key, r, outcome, entry.choice, answer)


def _same_hits(stored: Retrieval, fresh: Retrieval) -> bool:
    return (not fresh.result.partial and fresh.result.hits == stored.result.hits
            and fresh.rerank_scores == stored.rerank_scores)


def _reusable(params: QueryParams, choice: ModeChoice | None, answer: Answer) -> bool:
    """Deterministic answers only: quoted, or generated greedily, to completion, not
    degraded for a moment's load."""
    if choice is not None and choice.reason in TRANSIENT_REASONS:
        return False
    if answer.finish_reason in ("cancelled", "deadline") or answer.replaced.startswith(
            "deadline"):  # a generation cut by the moment's time, not by what it said
        return False
    return answer.mode == EXTRACTIVE or params.temperature == 0.0
