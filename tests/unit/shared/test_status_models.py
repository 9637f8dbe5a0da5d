"""`streamrag status` shows each embedding model's index and whether it has caught up."""

from __future__ import annotations

import asyncio
from pathlib import Path

from services.cli.status import index_models, render_models
from services.retrieval.settings import RetrievalSettings
from services.retrieval.shards import Shards
from shared.worker import members
from shared.worker.status_files import MODELS_FILE, write_json
from tests.unit.retrieval.helpers import chunk_set


async def _digest(partition: int, offset: int) -> str | None:
    return None


def test_each_workers_shards_combine_per_model(tmp_path: Path) -> None:
    shards = Shards(RetrievalSettings(data_dir=tmp_path / "worker"))
    asyncio.run(shards.assign({0: 0, 1: 0}, _digest))
    for offset, update in enumerate([chunk_set("d1", 1, [1, 2], model="old"),
                                     chunk_set("d2", 1, [3], model="old"),
                                     chunk_set("d1", 1, [4], model="new", dim=4)]):
        shards.apply(0, offset, update)
        shards.applied(0, offset, b"x")
    write_json(members.own_file(tmp_path / "data" / "retrieval-a", MODELS_FILE),
               {"models": shards.summary()})
    other = {"new": {"dim": 4, "shards": {"2": {"chunks": 5, "documents": 5,
                                                 "caught_up": True}}}}
    write_json(members.own_file(tmp_path / "data" / "retrieval-b", MODELS_FILE), {"models": other})
    models = index_models(tmp_path / "data")
    assert models["old"] == {"dim": 8, "chunks": 3, "documents": 2, "shards": [0, 1],
                             "caught_up": [0, 1]}
    # The new model lacks d2 on shard 0: caught up on the empty shard 1 and worker b's 2.
    assert models["new"] == {"dim": 4, "chunks": 6, "documents": 6, "shards": [0, 1, 2],
                             "caught_up": [1, 2]}
    table = render_models(models, "old").splitlines()
    assert table[1].startswith("new") and table[1].endswith("2/3 shards")
    assert table[2].endswith("2/2 shards <- queries")
