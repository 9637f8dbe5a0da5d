"""embed_sets with the real all-MiniLM-L6-v2 encoder: vectors, order, model id and fields."""

from __future__ import annotations

import numpy as np
import pytest

from services.embedding.vectors import embed_sets, longest_chunk
from shared.contract.records import Chunk, ChunkSet
from shared.encoder.embedder import MODEL_ID, Encoder


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder(device="cpu")


def chunk_set(doc_id: str, texts: list[str], op: str = "upsert") -> ChunkSet:
    chunks = tuple(Chunk(chunk_id=f"{doc_id}#v1#{i}#x", ordinal=i, text=t, token_count=len(t),
                         overlap_chars=i) for i, t in enumerate(texts))
    return ChunkSet(doc_id=doc_id, version=1, op=op, source="s", domain="d",  # type: ignore[arg-type]
                    event_time=1.0, ingest_time=2.0, chunks=chunks)


def test_batched_vectors_match_one_at_a_time_and_keep_every_field(encoder: Encoder) -> None:
    texts = ["The payment gateway certificate expired.",
             "Disk on node b7 filled up, so the billing cron crashed at midnight " * 6,
             "Rotate TLS certificates every ninety days."]
    sets = [chunk_set("a", texts[:2]), chunk_set("gone", [], op="delete"),
            chunk_set("b", texts[2:])]
    out = embed_sets(encoder, sets, max_batch_tokens=256)  # small budget: several passes
    assert [s.doc_id for s in out] == ["a", "gone", "b"]
    assert out[1].op == "delete" and out[1].chunks == ()
    got = [c.array() for s in out for c in s.chunks]
    alone = [encoder.encode([t])[0] for t in texts]
    for g, a in zip(got, alone, strict=True):
        assert g.shape == (384,) and np.linalg.norm(g) == pytest.approx(1.0, abs=1e-5)
        assert float(g @ a) == pytest.approx(1.0, abs=1e-4)
    assert float(got[0] @ got[2]) < 0.9  # different texts, different vectors
    assert all(s.model_id == MODEL_ID and s.dim == 384 for s in out)
    assert [c.overlap_chars for c in out[0].chunks] == [0, 1]
    assert out[0].chunks[1].text == texts[1] and out[0].ingest_time == 2.0


def test_each_chunk_is_encoded_with_its_documents_title(encoder: Encoder) -> None:
    text = "Patients given the drug recovered two days sooner."
    titled = chunk_set("t", [text]).model_copy(update={"title": "Oseltamivir for influenza"})
    got = embed_sets(encoder, [titled, chunk_set("u", [text])], max_batch_tokens=2048)
    with_title = encoder.encode(["Oseltamivir for influenza\n" + text])[0]
    alone = encoder.encode([text])[0]
    assert float(got[0].chunks[0].array() @ with_title) == pytest.approx(1.0, abs=1e-4)
    assert float(got[0].chunks[0].array() @ alone) < 0.99  # the title changed the vector
    assert float(got[1].chunks[0].array() @ alone) == pytest.approx(1.0, abs=1e-4)
    assert got[0].chunks[0].text == text and got[0].title == "Oseltamivir for influenza"


def test_longest_chunk_counts_the_special_tokens() -> None:
    assert longest_chunk(chunk_set("a", ["xx", "xxxxx"])) == 7
    assert longest_chunk(chunk_set("a", [])) == 2
