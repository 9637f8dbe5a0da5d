"""The text retention reaches the shards: a document version ingested longer ago than the
retention leaves the index (vectors, chunk texts, words) and the snapshot files, while its
version stays known so an older one replayed later is still refused; the stage sweeps on a
timer and rewrites the snapshots at once. The stage is an object: two builds are two."""

from __future__ import annotations
import __future__

import asyncio
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.retrieval import agents, snapshot
from services.retrieval.columns import EVERYTHING
from services.retrieval.drift import agents as drift_agents
from services.retrieval.index import Filters, Shard
from services.retrieval.settings import RetrievalSettings
from services.retrieval.shards import Shards
from tests.support import built
from tests.unit.retrieval.helpers import DIM, chunk_set, unit


def written(doc: str, version: int, seeds: list[int], at: float, text: str = ""):  # type: ignore[no-untyped-def]
    cs = chunk_set(doc, version, seeds, title=f"title of {doc}")
    chunks = tuple(c.model_copy(update={"text": text or c.text}) for c in cs.chunks)
    return cs.model_copy(update={"ingest_time": at, "chunks": chunks})


def found(shard: Shard, seed: int) -> set[str]:
    return {h.doc_id for h in shard.search(unit(seed), 10, Filters(access=EVERYTHING),
                                           text="secret words")}


def test_a_shard_expires_what_was_ingested_before_the_cut_and_nothing_else() -> None:
    shard = Shard("m", DIM, lexical=True)
    shard.apply(written("old", 1, [1, 2], at=100.0, text="secret words of old"))
    shard.apply(written("new", 1, [3], at=200.0, text="secret words of new"))
    assert found(shard, 1) == {"old", "new"}
    assert shard.expire(150.0) == ["old"]
    assert found(shard, 1) == found(shard, 2) == {"new"}
    assert all(h is None or h.doc_id == "new" for h in shard.columns.hits)
    assert len(shard) == 1 and len(shard.vectors) == 1
    assert shard.expire(150.0) == []  # idempotent
    # Its version stays known: an older one replayed later is refused, a newer one applies.
    assert shard.apply(written("old", 0, [4], at=300.0)) is False
    assert shard.apply(written("old", 2, [4], at=300.0)) is True
    assert found(shard, 4) >= {"old"}


def test_a_newer_version_restarts_the_clock_and_a_delete_stops_it() -> None:
    shard = Shard("m", DIM)
    shard.apply(written("d", 1, [1], at=100.0))
    shard.apply(written("d", 2, [2], at=500.0))
    assert shard.expire(400.0) == [] and shard.doc_written == {"d": 500.0}
    shard.apply(chunk_set("d", 3, [], op="delete"))
    assert shard.doc_written == {} and shard.expire(10**12) == []


@given(times=st.lists(st.floats(0, 1000, allow_nan=False), min_size=1, max_size=12),
       cut=st.floats(0, 1000, allow_nan=False))
def test_exactly_the_documents_ingested_before_the_cut_go(times: list[float], cut: float) -> None:
    shard = Shard("m", DIM)
    for i, t in enumerate(times):
        shard.apply(written(f"d{i}", 1, [i], at=t))
    gone = shard.expire(cut)
    assert gone == sorted(f"d{i}" for i, t in enumerate(times) if t < cut)
    left = {h.doc_id for h in shard.columns.hits if h is not None}
    assert left == {f"d{i}" for i, t in enumerate(times) if t >= cut}


def test_the_snapshot_keeps_ingest_times_and_an_old_one_uses_event_times(
        tmp_path: Path) -> None:
    shard = Shard("m", DIM)
    shard.apply(written("a", 1, [1], at=123.0))
    path = tmp_path / "shard-0.npz"
    snapshot.save(shard, path)
    loaded = snapshot.load(path, "m", DIM, shard.vectors.config)  # type: ignore[attr-defined]
    assert loaded is not None and loaded.doc_written == {"a": 123.0}
    # A snapshot written before ingest times were kept: the event time (100.0) stands in.
    with np.load(path, allow_pickle=False) as data:
        state = json.loads(data["state"].tobytes())
        index = data["index"]
    del state["doc_written"]
    raw = np.frombuffer(json.dumps(state).encode(), dtype="uint8")
    with path.open("wb") as f:
        np.savez(f, index=index, state=raw)
    older = snapshot.load(path, "m", DIM, shard.vectors.config)  # type: ignore[attr-defined]
    assert older is not None and older.doc_written == {"a": 100.0}


def settings_for(tmp_path: Path, retention_ms: int | None) -> RetrievalSettings:
    return RetrievalSettings(data_dir=tmp_path, text_retention_ms=retention_ms, drift=False,
                             lexical=True)


def test_the_stage_sweeps_the_shards_and_rewrites_their_snapshots_without_the_text(
        tmp_path: Path) -> None:
    stage = built.stage("retrieval", data_dir=tmp_path, text_retention_ms=60_000,
                        lexical=True, drift=False)
    shards: Shards = stage.shards
    asyncio.run(shards.assign({0: 0}, lambda *_: asyncio.sleep(0, None)))
    shards.apply(0, 0, written("old", 1, [1], at=1_000.0, text="the old secret sentence"))
    shards.apply(0, 1, written("new", 1, [2], at=1_050.0, text="the new plain sentence"))
    shards.applied(0, 1, b"x")
    asyncio.run(shards.save())
    files = list((tmp_path / "retrieval-shards").rglob("shard-0.npz"))
    assert len(files) == 1 and b"old secret" in files[0].read_bytes()
    generation = shards.generation
    assert asyncio.run(stage.expire_text_at(1_000.0 + 59.0)) == 0  # not yet
    assert shards.generation == generation  # nothing changed: cached answers stay valid
    assert asyncio.run(stage.expire_text_at(1_000.0 + 61.0)) == 1
    assert shards.generation > generation  # the answer cache sees the change
    data = files[0].read_bytes()
    assert b"old secret" not in data and b"new plain" in data
    assert asyncio.run(stage.expire_text_at(10**10)) == 1
    assert b"new plain" not in files[0].read_bytes()


def test_without_a_text_retention_nothing_expires(tmp_path: Path) -> None:
    stage = built.stage("retrieval", data_dir=tmp_path, drift=False)
    assert stage.settings.text_kept_s is None
    asyncio.run(stage.shards.assign({0: 0}, lambda *_: asyncio.sleep(0, None)))
    stage.shards.apply(0, 0, written("old", 1, [1], at=0.0))
    assert asyncio.run(stage.expire_text_at(10**10)) == 0
    assert len(stage.shards.get("m", 0)) == 1


def test_the_setting_is_the_mesh_wide_text_retention(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_AUDIT_TEXT_RETENTION_MS", "20000")
    settings = RetrievalSettings()
    assert settings.text_kept_s == 20.0 and settings.expire_every_s == 2.0
    monkeypatch.setenv("STREAMRAG_AUDIT_TEXT_RETENTION_MS", "-1")
    assert RetrievalSettings().text_kept_s is None


def test_two_builds_are_two_independent_stages(tmp_path: Path) -> None:
    one = built.stage("retrieval", data_dir=tmp_path / "one", drift=False)
    two = built.stage("retrieval", data_dir=tmp_path / "two", drift=False)
    assert one.shards is not two.shards and one.drift is not two.drift
    assert one.app is not two.app and one.index is not two.index
    asyncio.run(one.shards.assign({0: 0}, lambda *_: asyncio.sleep(0, None)))
    one.shards.apply(0, 0, written("a", 1, [1], at=0.0))
    assert two.shards.get("m", 0) is None


STATELESS = (ModuleType, type, type(len), type(lambda: 0), __future__._Feature)


def frozen(value: object) -> bool:
    params = getattr(type(value), "__dataclass_params__", None)
    return bool(params and params.frozen)


@pytest.mark.parametrize("module", [agents, drift_agents])
def test_the_stage_keeps_no_mutable_state_at_module_level(module: ModuleType,
                                                          tmp_path: Path) -> None:
    """Only functions, classes, modules, loggers, process-wide metrics and constants, also
    after a build (a build that rebinds module globals is what this rules out)."""
    assert built.stage("retrieval", data_dir=tmp_path) is not None
    from logging import Logger

    from prometheus_client.metrics import MetricWrapperBase
    kept = {name: value for name, value in vars(module).items()
            if not name.startswith("__")
            and not isinstance(value, (*STATELESS, Logger, MetricWrapperBase, str, int,
                                       float, tuple, frozenset))
            and not frozen(value)}
    assert kept == {}
