"""The embedding agent's batch fallback: one poison set is dead-lettered, its batch still ships."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, patch

import numpy as np

from shared.contract.records import Chunk, ChunkSet
from tests.support import built

stage = built.stage("embedding")


class PoisonEncoder:
    """Embeds anything but text containing 'poison' (as a model bug on one input would)."""

    model_id, dim = "fake", 4

    def encode(self, texts: Sequence[str], max_batch_tokens: int = 0) -> np.ndarray:
        if any("poison" in t for t in texts):
            raise ValueError("cannot embed: poison text here")
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2


def pending(doc_id: str, text: str, offset: int) -> tuple[Any, ChunkSet]:
    message = SimpleNamespace(topic="chunks.v1", partition=0, offset=offset,
                              key=doc_id.encode(), value=b"{}")
    chunk_set = ChunkSet(doc_id=doc_id, version=1, source="s", domain="d", event_time=1,
                         ingest_time=2, chunks=(Chunk(chunk_id=f"{doc_id}:0", ordinal=0,
                                                      text=text, token_count=3),))
    return SimpleNamespace(message=message), chunk_set


def test_a_failing_batch_is_retried_set_by_set_and_only_the_poison_is_dead_lettered() -> None:
    live = [pending("a", "fine text", 1), pending("b", "poison text", 2),
            pending("c", "more text", 3)]
    dead = AsyncMock()
    with patch.object(stage.dlq, "send", dead):
        out = asyncio.run(stage._embedded(PoisonEncoder(), live))  # noqa: SLF001
    assert [s.doc_id for s in out] == ["a", "c"]
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["detail"], letter["offset"]) == (
        "embedding", "internal_error", "ValueError", 2)
    assert dead.await_count == 1 and "poison" not in dead.await_args.kwargs["value"].decode()
