"""One index per embedding model: records are routed by model id, never mixed, and a new
model's index answers only once it has caught up with the others."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.retrieval import models
from services.retrieval.columns import EVERYTHING
from services.retrieval.index import Filters
from services.retrieval.search import answer
from services.retrieval.settings import RetrievalSettings
from services.retrieval.shards import Shards, digest
from shared.contract.codec import encode
from shared.contract.records import EmbeddedChunkSet, SearchRequest, SearchSpec, encode_vector
from shared.errors import InvalidInput, ModelMismatchError
from tests.unit.retrieval.helpers import DIM, chunk_set, unit

OLD, NEW, NEW_DIM = "model-a", "model-b", 5


class Log:
    """A partition log consumed the way the index agent does."""

    def __init__(self) -> None:
        self.values: dict[tuple[int, int], bytes] = {}

    def put(self, shards: Shards, partition: int, update: EmbeddedChunkSet) -> None:
        offset = sum(1 for p, _ in self.values if p == partition)
        self.values[(partition, offset)] = encode(update)
        shards.apply(partition, offset, update)
        shards.applied(partition, offset, encode(update))

    async def digest_at(self, partition: int, offset: int) -> str | None:
        value = self.values.get((partition, offset))
        return digest(value) if value is not None else None


def old(doc: str, version: int = 1, op: str = "upsert") -> EmbeddedChunkSet:
    return chunk_set(doc, version, [hash(doc) % 1000], op=op, model=OLD)


def new(doc: str, version: int = 1, op: str = "upsert") -> EmbeddedChunkSet:
    return chunk_set(doc, version, [hash(doc) % 1000], op=op, model=NEW, dim=NEW_DIM)


def started(tmp_path: Path, partitions: tuple[int, ...] = (0, 1), **kw: object) -> Shards:
    shards = Shards(RetrievalSettings(data_dir=tmp_path, **kw))  # type: ignore[arg-type]
    asyncio.run(shards.assign(dict.fromkeys(partitions, 0), Log().digest_at))
    return shards


def test_covers_needs_every_document_at_least_at_its_version() -> None:
    assert models.covers({"a": 2, "b": 1}, {"a": 2, "b": 1})
    assert models.covers({"a": 3, "b": 1, "c": 1}, {"a": 2, "b": 1})
    assert not models.covers({"a": 1, "b": 1}, {"a": 2, "b": 1})  # an older version
    assert not models.covers({"a": 2}, {"a": 2, "b": 1})  # a document missing
    assert models.covers({}, {})


def test_records_of_two_models_go_to_their_own_indexes(tmp_path: Path) -> None:
    shards, log = started(tmp_path), Log()
    log.put(shards, 0, old("d1"))
    log.put(shards, 0, new("d1"))
    log.put(shards, 0, old("d2"))
    a, b = shards.get(OLD, 0), shards.get(NEW, 0)
    assert a is not None and b is not None
    assert (a.dim, b.dim) == (DIM, NEW_DIM)
    assert sorted(a.doc_version) == ["d1", "d2"] and sorted(b.doc_version) == ["d1"]
    assert {h.doc_id for h in a.search(unit(1), 10, Filters(access=EVERYTHING))} == {"d1", "d2"}
    assert [h.doc_id for h in b.search(unit(1, NEW_DIM), 10, Filters(access=EVERYTHING))] == ["d1"]
    # The new model started on every owned partition, seeing it from where it stood.
    assert shards.get(NEW, 1) is not None and len(shards.get(NEW, 1)) == 0  # type: ignore[arg-type]
    assert {m for m, _ in shards.dirty} == {OLD, NEW}


def test_a_known_model_with_another_dimension_never_enters_its_index(tmp_path: Path) -> None:
    shards, log = started(tmp_path), Log()
    log.put(shards, 0, old("d1"))
    wrong = chunk_set("d2", 1, [3], model=OLD, dim=NEW_DIM)  # the old id, the new vectors
    with pytest.raises(ModelMismatchError):
        shards.apply(0, 1, wrong)
    assert sorted(shards.get(OLD, 0).doc_version) == ["d1"]  # type: ignore[union-attr]


def test_a_new_model_must_carry_vectors_of_its_declared_dimension(tmp_path: Path) -> None:
    shards = started(tmp_path)
    lying = chunk_set("d1", 1, [3], model=NEW, dim=NEW_DIM).model_copy(update={"dim": 7})
    with pytest.raises(InvalidInput) as refused:
        shards.apply(0, 0, lying)
    assert refused.value.reason == "model_mismatch" and NEW not in shards.models


def test_a_new_model_with_a_broken_vector_is_invalid_input(tmp_path: Path) -> None:
    shards = started(tmp_path)
    good = new("d1")
    broken = good.model_copy(update={"chunks": (good.chunks[0].model_copy(
        update={"vector": "not base64!"}),)})
    with pytest.raises(InvalidInput) as refused:
        shards.apply(0, 0, broken)
    assert refused.value.reason == "invalid_vector" and NEW not in shards.models


def test_one_model_too_many_is_refused(tmp_path: Path) -> None:
    shards, log = started(tmp_path, max_models=1), Log()
    log.put(shards, 0, old("d1"))
    with pytest.raises(InvalidInput) as refused:
        shards.apply(0, 1, new("d1"))
    assert refused.value.reason == "too_many_models" and list(shards.models) == [OLD]


def test_a_new_model_catches_up_once_it_holds_every_document(tmp_path: Path) -> None:
    shards, log = started(tmp_path), Log()
    for doc in ("d1", "d2", "d3"):
        log.put(shards, 0, old(doc))
    log.put(shards, 0, old("d2", 2, op="delete"))
    assert shards.caught_up(OLD, 0)  # alone: nothing to catch up with
    log.put(shards, 0, new("d1"))
    log.put(shards, 0, new("d3"))
    assert not shards.caught_up(NEW, 0)  # d2's delete (version 2) is still missing
    log.put(shards, 0, new("d2", 1))
    assert not shards.caught_up(NEW, 0)  # an older version is not enough
    log.put(shards, 0, new("d2", 2, op="delete"))
    assert shards.caught_up(NEW, 0)
    assert shards.caught_up(NEW, 1)  # both empty there
    # Sticky both ways: a new version reaching one model first does not stop the other.
    log.put(shards, 0, new("d4"))
    assert shards.caught_up(OLD, 0) and shards.caught_up(NEW, 0)


def test_a_partition_still_replaying_is_not_caught_up(tmp_path: Path) -> None:
    shards = Shards(RetrievalSettings(data_dir=tmp_path))
    asyncio.run(shards.assign({0: 3}, Log().digest_at))
    shards.apply(0, 0, old("d1"))
    shards.applied(0, 0, b"x")
    assert not shards.caught_up(OLD, 0)
    shards.applied(0, 2, b"y")
    assert shards.caught_up(OLD, 0)


def test_each_model_snapshots_apart_and_resumes_from_its_own_offset(tmp_path: Path) -> None:
    shards, log = started(tmp_path), Log()
    log.put(shards, 0, old("d1"))
    log.put(shards, 0, old("d2"))
    assert shards.caught_up(OLD, 0)
    asyncio.run(shards.save())
    log.put(shards, 0, new("d1"))  # offset 2: the new model's shard is not saved yet
    assert len(list(tmp_path.rglob(models.MARKER))) == 2  # known before its first snapshot

    restarted = Shards(RetrievalSettings(data_dir=tmp_path))
    assert set(restarted.models) == {OLD, NEW}
    # The old model resumes after offset 1; the new one has no snapshot: the partition
    # replays from 0 and the old model's shard passes over what it holds.
    assert asyncio.run(restarted.assign({0: 3, 1: 0}, log.digest_at)) == {0: 0, 1: 0}
    assert len(restarted.get(OLD, 0)) == 2  # type: ignore[arg-type]
    for offset in range(3):
        value = log.values[(0, offset)]
        restarted.apply(0, offset, EmbeddedChunkSet.model_validate_json(value))
        restarted.applied(0, offset, value)
    a, b = restarted.get(OLD, 0), restarted.get(NEW, 0)
    assert a is not None and b is not None and a.caught_up  # the flag came back too
    assert (len(a), len(b), a.offset, b.offset) == (2, 1, 2, 2)


def test_a_dropped_model_is_deleted_and_no_longer_indexed(tmp_path: Path) -> None:
    shards, log = started(tmp_path), Log()
    log.put(shards, 0, old("d1"))
    log.put(shards, 0, new("d1"))
    asyncio.run(shards.save())
    dropped = started(tmp_path, drop_models=frozenset({OLD}))
    assert list(dropped.models) == [NEW]
    assert not dropped.folder(OLD).exists() and dropped.folder(NEW).exists()
    assert dropped.apply(0, 2, old("d9")) is False and dropped.get(OLD, 0) is None


def request(model: str, dim: int) -> SearchRequest:
    spec = SearchSpec(query_id="q", vector=encode_vector(unit(1, dim)), top_k=5,
                      all_access=True)  # this module is about models, not access
    return SearchRequest(request_id="r", partition=0, model_id=model, dim=dim, deadline=0.0,
                         queries=(spec,))


def test_a_search_names_its_model_and_gets_only_that_index(tmp_path: Path) -> None:
    shards, log = started(tmp_path, partitions=(0,)), Log()
    log.put(shards, 0, old("d1"))
    log.put(shards, 0, old("d2"))
    log.put(shards, 0, new("d1"))
    assert answer(shards, request(NEW, NEW_DIM), 0).error == "catching_up"
    assert answer(shards, request("unknown", DIM), 0).error == "model_mismatch"
    assert answer(shards, request(OLD, NEW_DIM), 0).error == "model_mismatch"
    hits = answer(shards, request(OLD, DIM), 0).results[0].hits
    assert {h.doc_id for h in hits} == {"d1", "d2"}
    log.put(shards, 0, new("d2"))
    reply = answer(shards, request(NEW, NEW_DIM), 0)
    assert not reply.error
    # Scored with the new model's vectors (5 numbers), not the old one's (8).
    q = unit(1, NEW_DIM)
    scores = {h.doc_id: h.score for h in reply.results[0].hits}
    assert scores == pytest.approx(
        {d: float(unit(hash(d) % 1000, NEW_DIM) @ q) for d in ("d1", "d2")}, abs=1e-5)


def test_a_partition_without_documents_answers_every_model_with_nothing(tmp_path: Path) -> None:
    shards, log = started(tmp_path, partitions=(0, 1)), Log()
    fresh = answer(shards, request(OLD, DIM), 0)  # a fresh mesh: no model known yet
    assert not fresh.error and [r.hits for r in fresh.results] == [()]
    log.put(shards, 0, old("d1"))
    assert answer(shards, request(NEW, NEW_DIM), 0).error == "model_mismatch"
    # Partition 1 holds no document of any model: the new one is not waited for there.
    reply = answer(shards, request(NEW, NEW_DIM), 1)
    assert not reply.error and [r.query_id for r in reply.results] == ["q"]
