"""An embedded chunk set over the record limit dead-letters its input (derived_too_large);
the batch's other outputs are still sent, and nothing oversized reaches the producer."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, patch

from shared.contract import sizes
from shared.contract.records import EmbeddedChunk, EmbeddedChunkSet
from tests.support import built

stage = built.stage("embedding")

LIMIT = sizes.MIN_RECORD_BYTES


def pending(doc_id: str, text_bytes: int, offset: int) -> tuple[Any, EmbeddedChunkSet]:
    message = SimpleNamespace(topic="chunks.v1", partition=2, offset=offset,
                              key=doc_id.encode(), value=b"{}")
    out = EmbeddedChunkSet(
        doc_id=doc_id, version=3, source="s", domain="d", event_time=1, ingest_time=2,
        model_id="m", dim=4, chunks=(EmbeddedChunk(chunk_id=f"{doc_id}#0", ordinal=0,
                                                   text="x" * text_bytes, token_count=3,
                                                   vector="AAAA"),))
    return SimpleNamespace(message=message), out


def test_an_oversized_output_is_dead_lettered_and_the_rest_are_sent() -> None:
    batch = [pending("small", 100, 1), pending("huge", LIMIT, 2), pending("edge", 200, 3)]
    events = {(out.doc_id, out.version): ev for ev, out in batch}
    sent, dead = AsyncMock(return_value="future"), AsyncMock()
    with patch.object(stage, "kafka", SimpleNamespace(max_record_bytes=LIMIT)), \
            patch.object(stage.embedded_topic, "send", sent), \
            patch.object(stage.dlq, "send", dead):
        futures = asyncio.run(stage.send_all([out for _, out in batch], events))
    assert futures == ["future", "future"]
    assert [(c.kwargs["key"], c.kwargs["partition"]) for c in sent.await_args_list] == [
        (b"m\0small", 2), (b"m\0edge", 2)]  # another model than the first: its own key
    assert all(len(c.kwargs["value"]) <= sizes.value_limit(b"huge", LIMIT)
               for c in sent.await_args_list)
    [call] = dead.await_args_list
    letter = json.loads(call.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["offset"]) == (
        "embedding", "derived_too_large", 2)
    assert "x" * 50 not in call.kwargs["value"].decode()  # a hash, never the text
