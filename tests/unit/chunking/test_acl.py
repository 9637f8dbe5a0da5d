"""Chunking copies a document version's access labels into its ChunkSet: every chunk of the
version is readable by exactly the document's readers; a delete carries none."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.contract.access import LABEL
from shared.contract.codec import decode, encode
from shared.contract.records import ChunkSet, RedactedDocument
from tests.support import built

stage = built.stage("chunking")

acls = st.lists(st.from_regex(LABEL, fullmatch=True), max_size=8).map(
    lambda xs: tuple(sorted(set(xs))))


@settings(max_examples=40, deadline=None)
@given(acls, st.integers(1, 400))
def test_every_chunk_set_carries_its_documents_labels(acl: tuple[str, ...], words: int) -> None:
    doc = RedactedDocument(doc_id="d", version=3, text="Alpha beta gamma. " * words,
                           title="T", source="s", event_time=1, ingest_time=2, acl=acl)
    chunk_set = stage.chunk_record(encode(doc))
    assert chunk_set.acl == acl and chunk_set.chunks
    assert decode(ChunkSet, encode(chunk_set)).acl == acl  # survives the topic


def test_a_new_version_with_other_labels_chunks_to_the_new_labels() -> None:
    v1 = RedactedDocument(doc_id="d", version=1, text="Same text.", source="s", event_time=1,
                          ingest_time=2, acl=("eng", "payments"))
    v2 = v1.model_copy(update={"version": 2, "acl": ("eng",)})
    one, two = stage.chunk_record(encode(v1)), stage.chunk_record(encode(v2))
    assert (one.acl, two.acl) == (("eng", "payments"), ("eng",))
    assert [c.text for c in one.chunks] == [c.text for c in two.chunks]
    assert {c.chunk_id for c in one.chunks}.isdisjoint(c.chunk_id for c in two.chunks)


def test_a_delete_carries_no_chunks_and_no_labels() -> None:
    gone = RedactedDocument(doc_id="d", version=4, op="delete", source="s", event_time=1,
                            ingest_time=2)
    chunk_set = stage.chunk_record(encode(gone))
    assert (chunk_set.op, chunk_set.chunks, chunk_set.acl) == ("delete", (), ())
