"""Embedding never sends a sealed input's output in clear: it is sealed under the input's
key (held since intake, else read again from the store), and a version forgotten
meanwhile goes on as its delete."""

from __future__ import annotations

import uuid

from shared.contract.records import Chunk, ChunkSet, EmbeddedChunk, EmbeddedChunkSet
from shared.contract.sealed import open_chunks, seal_chunks
from shared.keys.store import VersionKey
from tests.support import built

stage = built.stage("embedding")


def sealed_input(doc_id: str) -> tuple[ChunkSet, VersionKey]:
    key = stage.keys.create([(doc_id, 1)])[(doc_id, 1)]
    assert isinstance(key, VersionKey)
    clear = ChunkSet(doc_id=doc_id, version=1, source="s", domain="d", event_time=1,
                     ingest_time=2, title="Title", chunks=(
                         Chunk(chunk_id=f"{doc_id}:0", ordinal=0, text="alpha beta",
                               token_count=2),))
    return seal_chunks(clear, key), key


def output_of(chunk_set: ChunkSet) -> EmbeddedChunkSet:
    return EmbeddedChunkSet(**chunk_set.model_dump(exclude={"chunks", "schema_version"}),
                            model_id="m", dim=2, chunks=tuple(
                                EmbeddedChunk(**c.model_dump(), vector="AACAPwAAAEA=")
                                for c in chunk_set.chunks))


def test_a_sealed_inputs_output_is_sealed_even_when_its_key_left_the_cache() -> None:
    doc_id = f"e-{uuid.uuid4().hex[:8]}"
    sealed, key = sealed_input(doc_id)
    opened = stage.opened(sealed)
    assert opened.chunks[0].text == "alpha beta" and opened.key_id == key.key_id
    out = output_of(opened)
    held = stage.sealed(out)
    stage.sealing.clear()  # evicted: the store gives the key again
    again = stage.sealed(out)
    for record in (held, again):
        assert record.sealed and record.title == "" and record.chunks[0].text == ""
        assert record.chunks[0].vector == ""
        assert open_chunks(record, stage.keys).chunks[0].text == "alpha beta"
    assert held == again


def test_a_version_forgotten_between_intake_and_output_goes_on_as_its_delete() -> None:
    doc_id = f"f-{uuid.uuid4().hex[:8]}"
    sealed, _ = sealed_input(doc_id)
    out = output_of(stage.opened(sealed))
    stage.sealing.clear()
    stage.keys.destroy(doc_id, None, "forget t")
    gone = stage.sealed(out)
    assert (gone.op, gone.chunks, gone.title, gone.sealed) == ("delete", (), "", "")


def test_an_input_in_clear_goes_on_in_clear() -> None:
    clear = ChunkSet(doc_id="plain", version=1, source="s", domain="d", event_time=1,
                     ingest_time=2, chunks=(Chunk(chunk_id="p:0", ordinal=0, text="x",
                                                  token_count=1),))
    out = output_of(stage.opened(clear))
    assert stage.sealed(out) == out and not out.key_id
