"""Snapshots: a loaded shard answers exactly as the saved one; Shards resumes from them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.retrieval import models, snapshot
from services.retrieval.columns import EVERYTHING
from services.retrieval.index import Filters, IndexConfig, Shard
from services.retrieval.settings import RetrievalSettings
from services.retrieval.shards import Shards, digest
from shared.contract.codec import encode
from tests.unit.retrieval.helpers import DIM, EXACT_IVF, chunk_set, settle, unit


def filled(config: IndexConfig) -> Shard:
    shard = Shard("m", DIM, config)
    for n in range(60):
        shard.apply(chunk_set(f"d{n}", 1, [n, n + 1000], event_time=n,
                              domain="even" if n % 2 == 0 else "odd"))
    for n in range(0, 60, 7):
        shard.apply(chunk_set(f"d{n}", 2, [n + 5000]))  # updates free and reuse slots
    shard.apply(chunk_set("d3", 2, [], op="delete"))
    shard.offset = 123
    settle(shard)
    return shard


def answers(shard: Shard) -> list[list[tuple[str, float]]]:
    out = []
    for q in range(5):
        for f in (Filters(access=EVERYTHING), Filters(access=EVERYTHING, domain="even", since=10),
                  Filters(access=EVERYTHING, until=5)):
            out.append([(h.chunk_id, round(h.score, 5)) for h in shard.search(unit(q + 77), 7, f)])
    return out


@pytest.mark.parametrize("config", [IndexConfig(), EXACT_IVF], ids=["flat", "ivf"])
def test_loaded_snapshot_answers_like_the_original(tmp_path: Path, config: IndexConfig) -> None:
    shard = filled(config)
    path = snapshot.path_for(tmp_path, 2)
    snapshot.save(shard, path)
    loaded = snapshot.load(path, "m", DIM, config)
    assert loaded is not None
    assert (loaded.offset, len(loaded), loaded.vectors.is_ivf) == (123, len(shard),
                                                                   shard.vectors.is_ivf)
    assert answers(loaded) == answers(shard)
    # It keeps taking updates: the doc version table and slot bookkeeping came back too.
    assert loaded.apply(chunk_set("d0", 1, [9])) is False
    loaded.apply(chunk_set("d0", 3, [4242]))
    everything = Filters(access=EVERYTHING)
    assert [h.chunk_id for h in loaded.search(unit(4242), 1, everything)] == ["d0#v3#0"]
    assert not [h for h in loaded.search(unit(0), 200, everything) if h.doc_id == "d3"]


def test_no_snapshot_or_another_model_loads_nothing(tmp_path: Path) -> None:
    path = snapshot.path_for(tmp_path, 0)
    assert snapshot.load(path, "m", DIM, IndexConfig()) is None
    snapshot.save(filled(IndexConfig()), path)
    assert snapshot.load(path, "other-model", DIM, IndexConfig()) is None
    assert not list(tmp_path.glob("*.tmp"))


class Log:
    """A stand-in partition log: what digest_at finds at each offset."""

    def __init__(self) -> None:
        self.values: dict[tuple[int, int], bytes] = {}

    async def digest_at(self, partition: int, offset: int) -> str | None:
        value = self.values.get((partition, offset))
        return digest(value) if value is not None else None


def test_shards_resume_from_snapshots_and_rebuild_without(tmp_path: Path) -> None:
    settings = RetrievalSettings(data_dir=tmp_path)
    log = Log()
    first = Shards(settings)
    assert asyncio.run(first.assign({0: 0, 1: 0}, log.digest_at)) == {0: 0, 1: 0}
    assert first.ready(0) and first.ready(1)  # empty partitions answer at once
    for offset in range(5):
        update = chunk_set(f"d{offset}", 1, [offset])
        log.values[(1, offset)] = encode(update)
        assert first.apply(1, offset, update)
        first.applied(1, offset, encode(update))
    assert asyncio.run(first.save()) == [("m", 0), ("m", 1)]  # the model's shard on each
    assert asyncio.run(first.save()) == []  # only dirty shards are written

    second = Shards(settings)  # a restarted worker: it remembers the model
    assert asyncio.run(second.assign({1: 9, 2: 3}, log.digest_at)) == {1: 5, 2: 0}
    assert len(second.get("m", 1)) == 5 and not second.ready(1)  # type: ignore[arg-type]
    second.applied(1, 8, b"later")
    assert second.ready(1) and not second.ready(2)
    assert asyncio.run(second.assign({2: 3}, log.digest_at)) == {2: 0}
    assert second.get("m", 1) is None  # partition 1 moved away

    log.values[(1, 4)] = b"another log"  # the broker lost its log; offset 4 is someone else
    third = Shards(settings)
    assert asyncio.run(third.assign({1: 50}, log.digest_at)) == {1: 0}
    assert len(third.get("m", 1)) == 0  # type: ignore[arg-type]


def test_a_damaged_snapshot_means_a_rebuild_not_a_crash(tmp_path: Path) -> None:
    settings = RetrievalSettings(data_dir=tmp_path)
    shards = Shards(settings)
    models.write_marker(shards.folder("m"), "m", DIM)
    path = snapshot.path_for(shards.folder("m"), 0)
    snapshot.save(filled(IndexConfig()), path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # torn write
    shards = Shards(settings)
    assert asyncio.run(shards.assign({0: 500}, Log().digest_at)) == {0: 0}
    assert len(shards.get("m", 0)) == 0  # type: ignore[arg-type]
