"""Versions and duplicate suppression."""

from services.ingest.dedup import next_version, seen
from shared.records import Document


def doc(h: str, op: str = "upsert") -> Document:
    return Document(doc_id="d", version=1, op=op, text="t" if op == "upsert" else "",  # type: ignore[arg-type]
                    source="s", event_time=0, ingest_time=0, content_hash=h)


def test_first_version_is_one_then_increments() -> None:
    first = next_version(None, doc("a"))
    assert first is not None and first.version == 1
    second = next_version(seen(first), doc("b"))
    assert second is not None and second.version == 2


def test_repeat_is_dropped_but_a_return_to_old_content_is_not() -> None:
    first = next_version(None, doc("a"))
    assert first is not None
    assert next_version(seen(first), doc("a")) is None
    second = next_version(seen(first), doc("b"))
    assert second is not None
    third = next_version(seen(second), doc("a"))
    assert third is not None and third.version == 3


def test_delete_of_unknown_document_still_flows() -> None:
    out = next_version(None, doc("del", op="delete"))
    assert out is not None and out.op == "delete"
