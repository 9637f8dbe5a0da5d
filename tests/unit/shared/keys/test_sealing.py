"""Sealing: what goes in comes out under the version's key only, the same bytes each time
for the same text, and a sealed text moved to another document or version never opens."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.contract.audit_batches import document_sha256
from shared.contract.records import (
    Chunk,
    ChunkSet,
    EmbeddedChunk,
    EmbeddedChunkSet,
    RedactedDocument,
)
from shared.contract.sealed import (
    Forgotten,
    KeyUnavailable,
    open_chunks,
    open_document,
    open_with,
    seal,
    seal_chunks,
)
from shared.keys.store import VersionKey, VersionKeys

texts = st.text(min_size=1, max_size=300)


def keys(tmp: Path) -> VersionKeys:
    return VersionKeys(tmp / "versions.sqlite", bytes(32))


def key(store: VersionKeys, doc_id: str, version: int) -> VersionKey:
    made = store.create([(doc_id, version)])[(doc_id, version)]
    assert isinstance(made, VersionKey)
    return made


def doc(text: str, doc_id: str = "d", version: int = 1) -> RedactedDocument:
    return RedactedDocument(doc_id=doc_id, version=version, text=text, title="T " + text[:5],
                            metadata={"k": text[:9]}, source="s", event_time=1,
                            ingest_time=2, acl=("eng",))


@settings(max_examples=40)
@given(texts)
def test_a_sealed_document_holds_nothing_in_clear_and_opens_to_itself(
        tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    store = keys(tmp_path_factory.mktemp("k"))
    k = key(store, "d", 1)
    original = doc(text)
    sealed = seal(original, k)
    assert (sealed.text, sealed.title, sealed.metadata) == ("", "", {})
    assert sealed.acl == ("eng",) and sealed.key_id == k.key_id
    raw = base64.b64decode(sealed.sealed)
    assert len(text.encode()) < 8 or text.encode() not in raw  # ciphertext, not the text
    assert open_document(sealed, store) == original
    assert seal(original, k) == sealed  # deterministic: a replay writes the same bytes
    assert document_sha256(sealed) != document_sha256(original)  # the leaf covers the seal


def test_a_sealed_text_moved_to_another_version_or_document_does_not_open(
        tmp_path: Path) -> None:
    store = keys(tmp_path)
    k1, k2, other = key(store, "d", 1), key(store, "d", 2), key(store, "e", 1)
    sealed = seal(doc("alpha"), k1)
    for wrong in (k2, other):
        with pytest.raises(KeyUnavailable):
            open_with(sealed, wrong)
    moved = sealed.model_copy(update={"version": 2, "key_id": k2.key_id})
    with pytest.raises(KeyUnavailable):
        open_document(moved, store)
    tampered = sealed.model_copy(update={"sealed": sealed.sealed[:-4] + "AAAA"})
    with pytest.raises(KeyUnavailable):
        open_document(tampered, store)


def test_after_destruction_nothing_opens_and_the_reason_is_named(tmp_path: Path) -> None:
    store = keys(tmp_path)
    sealed = seal(doc("alpha"), key(store, "d", 1))
    chunks = seal_chunks(ChunkSet(doc_id="d", version=1, source="s", domain="x",
                                  event_time=1, ingest_time=2, title="T",
                                  chunks=(Chunk(chunk_id="d:0", ordinal=0, text="alpha",
                                                token_count=1),)), key(store, "d", 1))
    store.destroy("d", None, "forget r9")
    for opening in (lambda: open_document(sealed, store), lambda: open_chunks(chunks, store)):
        with pytest.raises(Forgotten, match="forget r9"):
            opening()
    with pytest.raises(KeyUnavailable):
        open_document(seal(doc("beta", "never"), key(keys(tmp_path / "other"), "never", 1)),
                      store)


@settings(max_examples=30)
@given(st.lists(texts, min_size=1, max_size=5), st.booleans())
def test_chunk_sets_seal_text_title_and_vectors_and_open_to_themselves(
        tmp_path_factory: pytest.TempPathFactory, chunk_texts: list[str],
        embedded: bool) -> None:
    store = keys(tmp_path_factory.mktemp("k"))
    k = key(store, "d", 3)
    common = {"doc_id": "d", "version": 3, "source": "s", "domain": "x", "event_time": 1,
              "ingest_time": 2, "title": "Title"}
    if embedded:
        original: ChunkSet | EmbeddedChunkSet = EmbeddedChunkSet(
            **common, model_id="m", dim=2, chunks=tuple(
                EmbeddedChunk(chunk_id=f"d:{i}", ordinal=i, text=t, token_count=len(t),
                              vector="AACAPwAAAEA=") for i, t in enumerate(chunk_texts)))
    else:
        original = ChunkSet(**common, chunks=tuple(
            Chunk(chunk_id=f"d:{i}", ordinal=i, text=t, token_count=len(t))
            for i, t in enumerate(chunk_texts)))
    sealed = seal_chunks(original, k)
    assert sealed.title == "" and all(c.text == "" for c in sealed.chunks)
    assert [c.token_count for c in sealed.chunks] == [c.token_count for c in original.chunks]
    if embedded:
        assert all(c.vector == "" for c in sealed.chunks)  # type: ignore[union-attr]
    assert open_chunks(sealed, store) == original
    delete = original.model_copy(update={"op": "delete", "chunks": ()})
    assert seal_chunks(delete, k) == delete  # a delete carries nothing to seal
