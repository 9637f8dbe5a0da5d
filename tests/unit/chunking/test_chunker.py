"""Chunking invariants with the real tokenizer: reassembly, budget, fences, determinism."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.chunking.chunker import FENCE, chunk_id, chunk_spans, split
from services.chunking.documents import DocumentChunker
from shared.contract.records import RedactedDocument
from shared.encoder.model import load_tokenizer
from shared.encoder.passage import TITLE_MAX_TOKENS, clip_title, passage

CHUNKER = DocumentChunker(load_tokenizer(), max_tokens=40)
offsets = CHUNKER.offsets

words = st.sampled_from(["alpha", "beta", "gamma", "delta", "payments", "Kafka", "42", "naïve",
                         "x" * 30, "end.", "clause,", "semi;"])
seps = st.sampled_from([" ", " ", " ", "\n", "\n\n", ". ", ", "])
texts = st.lists(st.tuples(words, seps), min_size=1, max_size=200).map(
    lambda parts: "".join(w + s for w, s in parts))


@settings(max_examples=60, deadline=None)
@given(texts, st.integers(min_value=8, max_value=64))
def test_chunks_reassemble_and_fit_the_budget(text: str, budget: int) -> None:
    parts = split(text, offsets, budget)
    assert "".join(parts) == text
    for part in parts:
        assert CHUNKER.count(part) <= budget


@settings(max_examples=30, deadline=None)
@given(texts, texts)
def test_no_cut_inside_a_code_fence_that_fits(before: str, after: str) -> None:
    fence = "```python\ndef f(x):\n\n    return x + 1\n```\n"
    text = before + "\n\n" + fence + after
    spans = chunk_spans(text, offsets(text), 40)
    (a, b), = [m.span() for m in FENCE.finditer(text)]
    cuts = [end for _, end in spans[:-1]]
    assert not [c for c in cuts if a < c < b]


def test_prefers_paragraph_then_sentence_boundaries() -> None:
    para = "One short sentence here. Another one follows it.\n\n"
    parts = split(para * 6, offsets, 40)
    assert all(p.endswith("\n\n") for p in parts[:-1])
    long_sentences = "This sentence has several words in it. " * 12
    parts = split(long_sentences, offsets, 20)
    assert all(re.search(r"\.\s$", p) for p in parts[:-1])


def test_ids_are_deterministic_and_content_addressed() -> None:
    assert chunk_id("d", 2, 0, "text") == chunk_id("d", 2, 0, "text")
    assert chunk_id("d", 2, 0, "text") != chunk_id("d", 2, 0, "other")
    assert chunk_id("d", 2, 0, "text").startswith("d#v2#0#")


def _doc(text: str, op: str = "upsert") -> RedactedDocument:
    return RedactedDocument(doc_id="d", version=3, op=op, text=text, source="s",  # type: ignore[arg-type]
                            event_time=1, ingest_time=2, domain="x")


def test_document_chunk_set_carries_the_document_fields() -> None:
    text = "Alpha beta gamma. " * 40
    cs = CHUNKER.chunk(_doc(text))
    assert cs.doc_id == "d" and cs.version == 3 and cs.domain == "x"
    assert "".join(c.text for c in cs.chunks) == text
    assert [c.ordinal for c in cs.chunks] == list(range(len(cs.chunks)))
    assert all(c.token_count <= 40 for c in cs.chunks)
    assert CHUNKER.chunk(_doc(text)) == cs


def test_delete_has_no_chunks() -> None:
    assert CHUNKER.chunk(_doc("", op="delete")).chunks == ()


OVERLAPPING = DocumentChunker(load_tokenizer(), max_tokens=40, overlap_tokens=8)


@settings(max_examples=40, deadline=None)
@given(texts)
def test_overlap_repeats_the_previous_text_and_still_reassembles(text: str) -> None:
    cs = OVERLAPPING.chunk(_doc(text))
    assert "".join(c.text[c.overlap_chars:] for c in cs.chunks) == text
    pos = 0
    for c in cs.chunks:
        core = c.text[c.overlap_chars:]
        # The prefix is exactly the text right before this chunk's core.
        assert text[pos - c.overlap_chars:pos] == c.text[:c.overlap_chars]
        assert c.token_count == CHUNKER.count(c.text) <= 40
        assert CHUNKER.count(c.text[:c.overlap_chars]) <= 8 + 1
        pos += len(core)
    assert cs.chunks[0].overlap_chars == 0
    if len(cs.chunks) > 2:
        assert any(c.overlap_chars > 0 for c in cs.chunks[1:])


@settings(max_examples=25, deadline=None)
@given(texts)
def test_identical_input_gives_identical_ids(text: str) -> None:
    first = [c.chunk_id for c in OVERLAPPING.chunk(_doc(text)).chunks]
    again = DocumentChunker(load_tokenizer(), max_tokens=40, overlap_tokens=8).chunk(_doc(text))
    assert [c.chunk_id for c in again.chunks] == first
    assert len(set(first)) == len(first)
    assert [c.chunk_id.split("#")[2] for c in again.chunks] == [str(i) for i in range(len(first))]


def test_overlap_must_leave_room_for_new_text() -> None:
    with pytest.raises(ValueError, match="overlap"):
        DocumentChunker(load_tokenizer(), max_tokens=40, overlap_tokens=20)


def test_the_title_counts_inside_every_chunks_budget() -> None:
    text = "Alpha beta gamma delta. " * 40
    doc = _doc(text).model_copy(update={"title": "Kafka consumer lag in payments"})
    cs = CHUNKER.chunk(doc)
    title_tokens = CHUNKER.count("Kafka consumer lag in payments")
    assert "".join(c.text for c in cs.chunks) == text  # the stored text is the text alone
    for c in cs.chunks:
        assert c.token_count == CHUNKER.count(passage(doc.title, c.text)) <= 40
        assert CHUNKER.count(c.text) <= 40 - title_tokens
    assert len(cs.chunks) > len(CHUNKER.chunk(_doc(text)).chunks)  # less room per chunk


def test_a_long_title_is_clipped_and_leaves_the_text_half_the_budget() -> None:
    title = "alpha " * 100
    clipped = clip_title(CHUNKER.tokenizer, title)
    assert CHUNKER.count(clipped) == TITLE_MAX_TOKENS and title.startswith(clipped)
    assert clip_title(CHUNKER.tokenizer, "  short title ") == "short title"
    cs = CHUNKER.chunk(_doc("Alpha beta gamma. " * 40).model_copy(update={"title": title}))
    assert all(CHUNKER.count(c.text) <= 20 for c in cs.chunks)
    assert "".join(c.text for c in cs.chunks) == "Alpha beta gamma. " * 40
