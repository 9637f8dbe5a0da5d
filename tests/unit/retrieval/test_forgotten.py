"""Retrieval and forgotten versions: a sealed set opens to itself while its key lives and
applies as its delete once the key is destroyed; shards loaded from a snapshot taken
before a forget (a restored backup) drop the forgotten versions and rewrite the files."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from services.retrieval.shards import Shards
from shared.contract.sealed import seal_chunks
from shared.errors import InvalidInput
from shared.keys.store import VersionKey, VersionKeys
from tests.support import built
from tests.unit.retrieval.helpers import chunk_set


def sealed_set(keys: VersionKeys, doc: str, version: int, seeds: list[int], text: str):  # type: ignore[no-untyped-def]
    made = keys.create([(doc, version)])[(doc, version)]
    assert isinstance(made, VersionKey)
    cs = chunk_set(doc, version, seeds, title=f"title of {doc}")
    cs = cs.model_copy(update={"chunks": tuple(c.model_copy(update={"text": text})
                                               for c in cs.chunks)})
    return cs, seal_chunks(cs, made)


def test_a_sealed_set_opens_while_its_key_lives_and_is_a_delete_after(tmp_path: Path) -> None:
    stage = built.stage("retrieval", data_dir=tmp_path, drift=False)
    doc = f"fa-{uuid.uuid4().hex[:8]}"  # the unit tests share one key store
    clear, sealed = sealed_set(stage.keys, doc, 1, [1, 2], "the ledger's words")
    assert sealed.sealed and stage.opened(sealed) == clear
    stage.keys.destroy(doc, None, "forget t")
    gone = stage.opened(sealed)
    assert (gone.op, gone.chunks, gone.sealed, gone.title) == ("delete", (), "", "")
    lost = sealed.model_copy(update={"doc_id": "elsewhere"})
    with pytest.raises(InvalidInput) as err:
        stage.opened(lost)
    assert err.value.reason == "key_unavailable"


def test_loaded_shards_drop_forgotten_versions_and_rewrite_their_snapshots(
        tmp_path: Path) -> None:
    stage = built.stage("retrieval", data_dir=tmp_path, drift=False, lexical=True)
    shards: Shards = stage.shards
    asyncio.run(shards.assign({0: 0}, lambda *_: asyncio.sleep(0, None)))
    keys = stage.keys
    gone, kept = f"gone-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    for offset, (doc, words) in enumerate([(gone, "zarnowiecki minutes"),
                                           (kept, "plain minutes")]):
        clear, _ = sealed_set(keys, doc, 1, [offset + 1], words)
        shards.apply(0, offset, clear)
    shards.applied(0, 1, b"x")
    asyncio.run(shards.save())
    [file] = list((tmp_path / "retrieval-shards").rglob("shard-0.npz"))
    assert b"zarnowiecki" in file.read_bytes()
    assert asyncio.run(stage.drop_forgotten()) == 0  # nothing forgotten yet
    keys.destroy(gone, None, "forget t")
    generation = shards.generation
    assert asyncio.run(stage.drop_forgotten()) == 1
    assert shards.generation > generation  # cached answers see the change
    data = file.read_bytes()
    assert b"zarnowiecki" not in data and b"plain minutes" in data
    assert shards.held() == {(kept, 1)}
