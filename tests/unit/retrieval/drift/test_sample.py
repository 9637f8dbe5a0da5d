"""An embedded chunk set as a drift sample: one unit vector per document, its main words."""

from __future__ import annotations

import numpy as np
import pytest

from services.retrieval.drift.sample import drift_sample, from_record, words
from shared.contract.records import EmbeddedChunk, EmbeddedChunkSet, encode_vector
from shared.errors import InvalidInput


def chunk_set(texts: list[str], vectors: list[np.ndarray], op: str = "upsert",
              ) -> EmbeddedChunkSet:
    chunks = tuple(EmbeddedChunk(chunk_id=f"c{i}", ordinal=i, text=t, token_count=5,
                                 vector=encode_vector(v / np.linalg.norm(v)))
                   for i, (t, v) in enumerate(zip(texts, vectors, strict=True)))
    return EmbeddedChunkSet.model_validate({
        "doc_id": "d1", "version": 3, "op": op, "title": "Disk incident", "source": "ops",
        "domain": "incidents", "event_time": 1.0, "ingest_time": 100.0,
        "model_id": "m", "dim": 4, "chunks": chunks})


def test_a_document_is_the_normalised_mean_of_its_chunks_and_its_frequent_words() -> None:
    update = chunk_set(["The disk on host-7 filled up; disk alerts fired.",
                        "Mail <EMAIL_ADDRESS> about the disk quota of 42 GB."],
                       [np.array([1.0, 0, 0, 0]), np.array([0, 1.0, 0, 0])])
    record = drift_sample(update)
    assert record is not None and record.chunks == 2 and record.ingest_time == 100.0
    sample = from_record(record, dim=4)
    np.testing.assert_allclose(sample.vector, [2 ** -0.5, 2 ** -0.5, 0, 0], atol=1e-6)
    assert record.terms["disk"] == 3
    assert "the" not in record.terms and "email_address" not in record.terms
    assert not any(t.isdigit() for t in record.terms)


def test_deletes_empty_documents_and_overlong_names_are_not_sampled() -> None:
    assert drift_sample(chunk_set([], [], op="delete")) is None
    assert drift_sample(chunk_set([], [])) is None
    long_source = chunk_set(["words"], [np.ones(4)]).model_copy(update={"source": "s" * 513})
    assert drift_sample(long_source) is None  # indexed all the same, never dead-lettered


def test_a_vector_that_is_not_a_unit_vector_of_the_keys_length_is_refused() -> None:
    record = drift_sample(chunk_set(["some words here"], [np.array([1.0, 2, 3, 4])]))
    assert record is not None
    with pytest.raises(InvalidInput, match="dim_mismatch"):
        from_record(record, dim=8)
    bad = record.model_copy(update={"vector": encode_vector(np.array([3.0, 0, 0, 0]))})
    with pytest.raises(InvalidInput, match="invalid_vector"):
        from_record(bad)


def test_words_skip_placeholders_stop_words_and_short_tokens() -> None:
    assert words("An <PERSON> met ab at the fault-tolerant node") == {
        "met": 1, "fault-tolerant": 1, "node": 1}
