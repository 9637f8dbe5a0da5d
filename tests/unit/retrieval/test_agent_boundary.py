"""The retrieval index agent: a set that breaks the shard is dead-lettered, the next applies."""

from __future__ import annotations

import asyncio
import json
from unittest.mock import AsyncMock, patch

from shared.contract.codec import encode
from shared.contract.records import EmbeddedChunkSet
from tests.support import built
from tests.unit.retrieval.helpers import chunk_set


class FlakyShard:
    """Applies sets, except that doc 'bad' hits a bug in the index."""

    model_id, dim = "m", 8

    def __init__(self) -> None:
        self.offset, self.digest = -1, ""
        self.applied: list[str] = []

    def apply(self, cs: EmbeddedChunkSet) -> None:
        if cs.doc_id == "bad":
            raise IndexError("bug while indexing bad text")
        self.applied.append(cs.doc_id)


def test_an_index_bug_dead_letters_the_set_and_the_partition_moves_on() -> None:
    shard = FlakyShard()
    dead = AsyncMock()
    stage = built.stage("retrieval")

    async def drive() -> None:
        stage.app.finalize()
        stage.app.flow_control.resume()
        with patch.object(stage.shards, "models", {"m": 8}), \
                patch.object(stage.shards, "by_model", {"m": {0: shard}}), \
                patch.object(stage.shards, "position", {0: (-1, "")}), \
                patch.object(stage.shards, "dirty", set()), \
                patch.object(stage.dlq, "send", dead):
            async with stage.index.test_context() as agent:
                for doc in ("bad", "good"):
                    await agent.put(value=encode(chunk_set(doc, 1, [1])), key=doc.encode(),
                                    partition=0)

    asyncio.run(drive())
    assert shard.applied == ["good"] and shard.offset == 1  # both offsets applied, in order
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["detail"]) == (
        "retrieval", "internal_error", "IndexError")
