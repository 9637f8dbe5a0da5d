"""Real chunk sets and embedded chunk sets (the real chunker and tokenizer, vectors of the
model's size) stay within the size plan of shared/contract/sizes.py for the densest text shapes."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from services.chunking.documents import DocumentChunker
from shared.contract import sizes
from shared.contract.codec import encode
from shared.contract.records import (
    ChunkSet,
    EmbeddedChunk,
    EmbeddedChunkSet,
    RedactedDocument,
    encode_vector,
)
from shared.contract.sealed import seal_chunks
from shared.encoder.model import MODEL_DIM, MODEL_ID, load_tokenizer
from shared.keys.sealing import VersionKey

SCIFACT = Path(__file__).resolve().parents[4] / "shared/data/beir/scifact-train/corpus.jsonl"
VECTOR = encode_vector(np.ones(MODEL_DIM, dtype="<f4") / np.sqrt(MODEL_DIM))


@functools.cache
def chunker() -> DocumentChunker:
    return DocumentChunker(load_tokenizer(), 254, 0)


def prose(n: int) -> str:
    words = "The cohort showed reduced expression of the receptor after treatment. "
    if SCIFACT.exists():
        words = "\n\n".join(json.loads(line)["text"] for line in SCIFACT.open())
    return (words * (n // len(words) + 1))[:n]


KEY = VersionKey("k" + "0" * 31, "d" * sizes.MAX_ID_CHARS, 1, bytes(32))

SHAPES = {
    "prose": prose,
    "one token per byte": lambda n: "!" * n,
    "digits": lambda n: "7 " * (n // 2),
    "cjk": lambda n: "漢" * (n // 3),
    "short paragraphs": lambda n: "a\n\n" * (n // 3),
}


def derived(text: str, doc_id: str, title: str = "") -> tuple[ChunkSet, EmbeddedChunkSet]:
    doc = RedactedDocument(doc_id=doc_id, version=1, text=text, title=title, source="s",
                           event_time=1.0, ingest_time=1.0)
    chunk_set = chunker().chunk(doc)
    embedded = EmbeddedChunkSet(
        **chunk_set.model_dump(exclude={"chunks", "schema_version"}), model_id=MODEL_ID,
        dim=MODEL_DIM, chunks=tuple(EmbeddedChunk(**c.model_dump(), vector=VECTOR)
                                    for c in chunk_set.chunks))
    return chunk_set, embedded


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n", [1, 1024, 65_536])
def test_each_shape_stays_within_the_plan(shape: str, n: int) -> None:
    doc_id = "d" * 64
    text = SHAPES[shape](n)
    chunk_set, embedded = derived(text, doc_id)
    plan = sizes.Shape(id_bytes=len(doc_id))
    text_bytes = len(json.dumps(text, ensure_ascii=False).encode())
    assert len(encode(chunk_set)) <= sizes.chunk_set_bytes(text_bytes, plan)
    assert len(encode(embedded)) <= sizes.embedded_set_bytes(text_bytes, plan)
    assert len(encode(seal_chunks(chunk_set, KEY))) <= sizes.sealed_chunk_set_bytes(
        text_bytes, plan)
    assert len(encode(seal_chunks(embedded, KEY))) <= sizes.sealed_chunk_set_bytes(
        text_bytes, plan, MODEL_DIM)


def test_the_densest_input_at_the_limit_with_a_long_title_and_id_fits_one_record() -> None:
    """One token per byte, a 512-character id, a title that takes 64 tokens of each chunk:
    the largest embedded chunk set a 1 MiB input makes, and it fits the record limit."""
    doc_id, title = "d" * sizes.MAX_ID_CHARS, "word " * 80
    text = "!" * (sizes.MAX_INPUT_BYTES - len(doc_id) - len(title) - 64)
    chunk_set, embedded = derived(text, doc_id, title)
    key = doc_id.encode()
    assert len(encode(embedded)) <= sizes.embedded_set_bytes(len(text), sizes.WORST)
    assert sizes.fits(encode(chunk_set), key) and sizes.fits(encode(embedded), key)
    assert len(encode(embedded)) > 12 * sizes.MIB  # the reason the limit is not 1 MiB
    # Sealed, as the mesh writes them: within the plan, and it fits.
    sealed = encode(seal_chunks(embedded, KEY))
    assert len(sealed) <= sizes.sealed_chunk_set_bytes(len(text), sizes.WORST, MODEL_DIM)
    assert sizes.fits(sealed, key) and sizes.fits(encode(seal_chunks(chunk_set, KEY)), key)
