"""The switch to the next embedding model: only once every shard's index of it has caught up,
and never a vector of one model searched, cached or compared with another's."""

from __future__ import annotations

import asyncio
import re
import threading
import zlib
from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import ValidationError

from services.inference.engine import QueryEngine
from services.inference.query import QueryParams
from services.inference.search.gather import Gather, GatherResult, ShardAnswer
from services.inference.search.scatter import SearchQuery
from services.inference.settings import InferenceSettings
from services.inference.switch import ModelSwitch, caught_up
from tests.unit.inference.fakes import WordEncoder, hit


class SmallWords(WordEncoder):
    """Another model: another id and dimension."""

    model_id, dim = "fake/small", 16

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class ModelShards:
    """Four shards that index the old model, and the new one once `caught` lists them."""

    def __init__(self) -> None:
        self.caught: set[int] = set()
        self.queries: list[SearchQuery] = []
        self.ready, self.partitions = True, 4

    async def search(self, query: SearchQuery, timeout_s: float) -> GatherResult:
        self.queries.append(query)
        assert len(query.vector) == query.dim  # the vector is the model it names
        gather = Gather(self.partitions)
        for p in range(self.partitions):
            if query.model_id == SmallWords.model_id and p not in self.caught:
                gather.add(ShardAnswer(p, error="catching_up"))
            else:
                gather.add(ShardAnswer(p, (hit(f"{query.model_id}-{p}", 0.5,
                                                "The broker disk filled up."),)))
        return gather.result(query.top_k)


def result(errors: dict[int, str], missing: tuple[int, ...] = (),
           found: bool = True) -> GatherResult:
    answered = tuple(p for p in range(4) if p not in errors and p not in missing)
    return GatherResult((hit("c", 0.5),) if found else (), answered, missing, errors)


def test_caught_up_only_when_every_shard_answers_from_an_index_with_something() -> None:
    assert caught_up(result({}), 4)
    assert not caught_up(result({2: "catching_up"}), 4)
    assert not caught_up(result({0: "model_mismatch"}), 4)
    assert not caught_up(result({}, missing=(3,)), 4)
    assert not caught_up(result({}), 0)
    assert not caught_up(result({}, found=False), 4)  # a fresh mesh answers empty


def test_the_next_model_needs_its_own_id() -> None:
    with pytest.raises(ValidationError, match="NEXT_MODEL_ID"):
        InferenceSettings(next_model_path="/tmp/model")
    with pytest.raises(ValidationError, match="nothing to switch to"):
        InferenceSettings(next_model_id="sentence-transformers/all-MiniLM-L6-v2")


def params(question: str = "what filled the broker disk?") -> QueryParams:
    return QueryParams(question=question, top_k=4, since=None, until=None, domain=None,
                       source=None, max_new_tokens=0, temperature=0.0, stop=())


def test_queries_use_the_old_model_until_every_shard_has_caught_up() -> None:
    async def go() -> tuple[ModelShards, list[str], ModelSwitch]:
        shards = ModelShards()
        engine = QueryEngine(InferenceSettings(hybrid=False), shards, WordEncoder())
        engine.start()
        switch = ModelSwitch(engine, shards, SmallWords, check_s=0.001, timeout_s=1.0)
        running = asyncio.ensure_future(switch.run())
        answered_by = []
        for caught in ({0}, {0, 1, 2}):  # the new model's index catching up shard by shard
            shards.caught = caught
            for _ in range(3):
                await asyncio.sleep(0.005)
                retrieval = await engine.retrieve(params(), 5.0)
                answered_by.append(retrieval.result.hits[0].chunk_id.split("-")[0])
                assert not switch.switched and not retrieval.result.partial
        shards.caught = {0, 1, 2, 3}
        await asyncio.wait_for(running, 5)
        retrieval = await engine.retrieve(params(), 5.0)
        answered_by.append(retrieval.result.hits[0].chunk_id.split("-")[0])
        await engine.stop()
        return shards, answered_by, switch
    shards, answered_by, switch = asyncio.run(go())
    assert answered_by == ["fake/words"] * 6 + ["fake/small"]
    probes = [q for q in shards.queries if q.model_id == "fake/small"]
    assert len(probes) >= 3 and all(q.dim == 16 for q in probes)
    assert switch.switched and switch.last_errors == {}


class GatedEncoder(WordEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.entered, self.gate = threading.Event(), threading.Event()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.entered.set()
        self.gate.wait(5)
        return super().encode(texts)


def test_a_question_encoded_across_the_switch_is_encoded_again_by_the_new_model() -> None:
    async def go() -> tuple[SearchQuery, SmallWords]:
        shards = ModelShards()
        shards.caught = {0, 1, 2, 3}
        old, new = GatedEncoder(), SmallWords()
        engine = QueryEngine(InferenceSettings(hybrid=False), shards, old)
        engine.start()
        asking = asyncio.ensure_future(engine.retrieve(params(), 5.0))
        await asyncio.to_thread(old.entered.wait, 5)  # the old model is encoding it now
        engine.switch_encoder(new)
        old.gate.set()
        await asking
        await engine.stop()
        return shards.queries[-1], new
    searched, new = asyncio.run(go())
    assert (searched.model_id, searched.dim, len(searched.vector)) == ("fake/small", 16, 16)
    assert new.calls == [["what filled the broker disk?"]]


def test_an_answer_after_the_switch_compares_vectors_of_one_model() -> None:
    async def go() -> tuple[str, SmallWords, int]:
        shards = ModelShards()
        shards.caught = {0, 1, 2, 3}
        engine = QueryEngine(InferenceSettings(hybrid=False), shards, WordEncoder())
        engine.start()
        retrieval = await engine.retrieve(params(), 5.0)  # the old model's vector (64)
        new = SmallWords()
        engine.switch_encoder(new)
        answer = await engine.answer(retrieval)
        cached = len(engine.questions)
        await engine.stop()
        return "".join(answer.pieces), new, cached
    text, new, cached = asyncio.run(go())
    assert "broker disk filled up" in text
    assert ["what filled the broker disk?"] in new.calls  # the question again, new model
    assert cached == 1  # the new cache holds the new model's vector only
