"""The chunking agent's per-record step: good records chunk, bad ones become dead-letter reasons."""

from __future__ import annotations

import asyncio
import json
from unittest.mock import AsyncMock, patch

import pytest

from shared.contract.codec import encode
from shared.contract.records import RedactedDocument
from shared.contract.sealed import open_chunks, seal
from shared.errors import InvalidInput
from shared.keys.sealing import VersionKey
from tests.support import built

stage = built.stage("chunking")

DOC = RedactedDocument(doc_id="d", version=2, text="Alpha beta. " * 300, source="s",
                       event_time=1, ingest_time=2)


def test_a_document_becomes_its_chunk_set() -> None:
    chunk_set = stage.chunk_record(encode(DOC))
    assert (chunk_set.doc_id, chunk_set.version) == ("d", 2) and len(chunk_set.chunks) > 1
    assert "".join(c.text[c.overlap_chars:] for c in chunk_set.chunks) == DOC.text


def test_undecodable_input_names_its_reason() -> None:
    with pytest.raises(InvalidInput) as err:
        stage.chunk_record(b'{"doc_id": ')
    assert err.value.reason == "malformed_json"


def test_a_chunker_failure_is_a_dead_letter_not_a_lost_record(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(doc: RedactedDocument) -> None:
        raise IndexError("bug quoting Alpha beta")

    monkeypatch.setattr(stage.chunker, "chunk", broken)
    good = RedactedDocument(doc_id="ok", version=1, text="Gamma delta.", source="s",
                            event_time=1, ingest_time=2)
    forward, dead = AsyncMock(), AsyncMock()

    async def drive() -> None:
        stage.app.finalize()
        stage.app.flow_control.resume()
        with patch.object(stage.chunks_topic, "send", forward), \
                patch.object(stage.dlq, "send", dead):
            async with stage.chunk.test_context() as agent:
                await agent.put(value=encode(DOC), key=b"d")
                monkeypatch.undo()
                await agent.put(value=encode(good), key=b"ok")

    asyncio.run(drive())
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["detail"]) == (
        "chunking", "internal_error", "IndexError")
    assert "Alpha" not in dead.await_args.kwargs["value"].decode()  # hash only, no message
    assert forward.await_count == 1 and forward.await_args.kwargs["key"] == b"ok"


def test_a_sealed_document_chunks_to_a_set_sealed_under_its_key_and_a_forgotten_one_to_a_delete(
) -> None:
    made = stage.keys.create([("sealed-d", 4)])[("sealed-d", 4)]
    assert isinstance(made, VersionKey)
    doc = RedactedDocument(doc_id="sealed-d", version=4, text="Alpha beta. " * 300,
                           title="Ledger", source="s", event_time=1, ingest_time=2)
    chunk_set = stage.chunk_record(encode(seal(doc, made)))
    assert chunk_set.key_id == made.key_id and chunk_set.title == ""
    assert len(chunk_set.chunks) > 1 and all(c.text == "" for c in chunk_set.chunks)
    opened = open_chunks(chunk_set, stage.keys)
    assert opened.title == "Ledger"
    assert "".join(c.text[c.overlap_chars:] for c in opened.chunks) == doc.text
    stage.keys.destroy("sealed-d", None, "forget t")
    gone = stage.chunk_record(encode(seal(doc, made)))
    assert (gone.op, gone.chunks, gone.sealed) == ("delete", (), "")


def test_a_sealed_document_whose_key_this_store_lacks_is_dead_lettered_by_reason() -> None:
    elsewhere = VersionKey("k" + "0" * 31, "nowhere", 1, bytes(32))
    doc = RedactedDocument(doc_id="nowhere", version=1, text="Alpha.", source="s",
                           event_time=1, ingest_time=2)
    with pytest.raises(InvalidInput) as err:
        stage.chunk_record(encode(seal(doc, elsewhere)))
    assert err.value.reason == "key_unavailable"
