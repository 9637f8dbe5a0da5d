"""The embedding model is a setting: its id names the consumer group and the output keys, so a
new model re-reads chunks.v1 from the start and its records never replace another model's."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, patch

import numpy as np
import pytest
from pydantic import ValidationError

from services.embedding.settings import EmbeddingSettings
from shared.contract.records import Chunk, ChunkSet, EmbeddedChunkSet
from shared.contract.topics import CHUNKS, EMBEDDING_APP, embedded_key, embedding_app
from shared.encoder.model import MODEL_ID
from shared.kafka import membership
from tests.support import built

stage = built.stage("embedding")


def test_each_model_has_its_own_group_and_the_first_model_keeps_its_own() -> None:
    assert embedding_app(MODEL_ID) == EMBEDDING_APP
    other, third = embedding_app("acme/tiny-encoder"), embedding_app("acme/tiny encoder")
    assert len({EMBEDDING_APP, other, third}) == 3  # ids that read alike stay apart
    assert other.startswith(EMBEDDING_APP + ".acme_tiny-encoder-")
    assert re.fullmatch(r"[A-Za-z0-9._-]+", third)  # a safe group id and folder name


def test_output_keys_are_per_document_and_model() -> None:
    assert embedded_key(MODEL_ID, "doc-1") == b"doc-1"  # as before the model was a setting
    keys = {embedded_key(m, d) for m in (MODEL_ID, "m2", "m3") for d in ("doc-1", "doc-2")}
    assert len(keys) == 6  # compaction keeps every model's newest version of each document


def test_the_chunk_topic_is_compacted_so_a_new_model_reads_the_whole_corpus() -> None:
    assert CHUNKS.broker_config() == {"cleanup.policy": "compact",
                                      "max.message.bytes": str(16 * 1024 * 1024)}


def test_a_model_folder_needs_its_own_id(tmp_path: Path) -> None:
    assert EmbeddingSettings().encoder_model_id() == MODEL_ID
    with pytest.raises(ValidationError, match="model_id"):
        EmbeddingSettings(model_path=tmp_path)
    named = EmbeddingSettings(model_path=tmp_path, model_id="acme/tiny")
    assert named.encoder_model_id() == "acme/tiny"


class TinyEncoder:
    model_id, dim = "acme/tiny", 3

    def encode(self, texts: Sequence[str], max_batch_tokens: int = 0) -> np.ndarray:
        return np.full((len(texts), self.dim), 3 ** -0.5, dtype=np.float32)


def event(doc_id: str, partition: int) -> tuple[Any, ChunkSet]:
    message = SimpleNamespace(topic="chunks.v1", partition=partition, offset=1,
                              key=doc_id.encode(), value=b"{}", generation_id=7)
    chunk_set = ChunkSet(doc_id=doc_id, version=1, source="s", domain="d", event_time=1,
                         ingest_time=2, chunks=(Chunk(chunk_id=f"{doc_id}:0", ordinal=0,
                                                      text="some text", token_count=3),))
    done = SimpleNamespace(count=0)
    return SimpleNamespace(message=message, done=done,
                           ack=lambda: setattr(done, "count", done.count + 1)), chunk_set


def test_outputs_carry_the_model_and_stay_on_their_input_partition() -> None:
    sent = AsyncMock(side_effect=lambda **kw: asyncio.sleep(0))
    batch = [event("a", 2), event("b", 0)]
    with patch.object(stage, "encoder", TinyEncoder()), \
            patch.object(stage.embedded_topic, "send", sent), \
            patch.object(type(stage.app), "consumer_generation_id", 7, create=True):
        asyncio.run(stage.flush(batch))
    calls = [c.kwargs for c in sent.await_args_list]
    assert [(c["key"], c["partition"]) for c in calls] == [(b"acme/tiny\0a", 2),
                                                           (b"acme/tiny\0b", 0)]
    out = EmbeddedChunkSet.model_validate_json(calls[0]["value"])
    assert (out.model_id, out.dim, len(out.chunks[0].array())) == ("acme/tiny", 3, 3)
    assert [ev.done.count for ev, _ in batch] == [1, 1]  # each handed to the checkpoint once


def test_a_worker_evicted_while_embedding_sends_nothing() -> None:
    # Woken from a stop past its session timeout: the partitions' new owner embeds them.
    sent = AsyncMock(side_effect=lambda **kw: asyncio.sleep(0))
    batch = [event("a", 2), event("b", 0)]

    async def evicted(app: Any) -> str:
        return "UnknownMemberIdError"
    with patch.object(stage, "encoder", TinyEncoder()), \
            patch.object(stage.embedded_topic, "send", sent), \
            patch.object(membership, "evicted", evicted), \
            patch.object(type(stage.app), "consumer_generation_id", 7, create=True):
        asyncio.run(stage.flush(batch))
    assert sent.await_args_list == []
    assert [ev.done.count for ev, _ in batch] == [1, 1]  # done: nothing of it is committed
