"""Embedding copies a ChunkSet's access labels (and every other field) into its
EmbeddedChunkSet, whatever the batch holds; only the vectors and the model are added."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from services.embedding.vectors import embed_sets
from shared.contract.access import LABEL
from shared.contract.codec import decode, encode
from shared.contract.records import Chunk, ChunkSet, EmbeddedChunkSet


class Encoder:
    """A stand-in model: one unit vector per text, from its length (no tokenizer needed:
    the sets have no titles)."""

    model_id = "fake-model"
    dim = 4
    tokenizer = None

    def encode(self, texts: Sequence[str], max_batch_tokens: int = 8192) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, len(t) % self.dim] = 1.0
        return out


acls = st.lists(st.from_regex(LABEL, fullmatch=True), max_size=6).map(
    lambda xs: tuple(sorted(set(xs))))


@st.composite
def chunk_sets(draw: st.DrawFn) -> ChunkSet:
    doc_id = draw(st.text(alphabet="abc", min_size=1, max_size=4))
    deleted = draw(st.booleans())
    n = 0 if deleted else draw(st.integers(1, 4))
    chunks = tuple(Chunk(chunk_id=f"{doc_id}#{i}", ordinal=i, text="x" * (i + 1),
                         token_count=i + 1) for i in range(n))
    return ChunkSet(doc_id=doc_id, version=draw(st.integers(1, 9)),
                    op="delete" if deleted else "upsert", source="s", domain="d",
                    event_time=1.0, ingest_time=2.0, chunks=chunks,
                    acl=() if deleted else draw(acls))


@settings(max_examples=100, deadline=None)
@given(st.lists(chunk_sets(), min_size=1, max_size=6))
def test_every_embedded_set_carries_its_chunk_sets_labels_and_fields(
        sets: list[ChunkSet]) -> None:
    out = embed_sets(Encoder(), sets, max_batch_tokens=64)  # type: ignore[arg-type]
    assert [e.acl for e in out] == [s.acl for s in sets]
    for s, e in zip(sets, out, strict=True):
        kept = s.model_dump(exclude={"chunks"})
        assert e.model_dump(exclude={"chunks", "model_id", "dim"}) == kept
        assert [c.chunk_id for c in e.chunks] == [c.chunk_id for c in s.chunks]
        assert decode(EmbeddedChunkSet, encode(e)).acl == s.acl  # survives the topic
