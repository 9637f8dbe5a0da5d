"""What each change counts for in the stream statistics."""

from __future__ import annotations

from services.ingest.counts import CountsBuffer, change_counts, parse_failure_counts
from services.ingest.dedup import apply_change
from shared.contract.records import Document, Position


def doc(text: str, lsn: int, op: str = "upsert") -> Document:
    return Document(doc_id="d", version=1, op=op, text=text, source="crm", domain="sales",
                    event_time=1.0, ingest_time=1.0, content_hash=f"h-{op}-{text}",
                    position=Position(kind="pg_lsn", key=(lsn,)))


def test_new_updated_deleted_repeat_and_refused() -> None:
    first = apply_change(None, doc("a", 1))
    second = apply_change(first.state, doc("b", 2))
    repeat = apply_change(second.state, doc("b", 2))
    gone = apply_change(second.state, doc("", 3, "delete"))
    got = [change_counts(doc("a", 1), first).counts, change_counts(doc("b", 2), second).counts,
           change_counts(doc("b", 2), repeat).counts,
           change_counts(doc("", 3, "delete"), gone).counts,
           change_counts(doc("a", 1), None, "stale_version").counts]
    assert got == [{"received": 1, "new": 1}, {"received": 1, "updated": 1}, {"received": 1},
                   {"received": 1, "deleted": 1},
                   {"received": 1, "dead_lettered.stale_version": 1}]
    assert (change_counts(doc("a", 1), first, now=5.0).source, ) == ("crm",)


def test_a_parse_failure_counts_under_unknown() -> None:
    c = parse_failure_counts("malformed_json", now=5.0)
    assert (c.source, c.domain, c.counts, c.at) == (
        "unknown", "unknown", {"received": 1, "dead_lettered.malformed_json": 1}, 5.0)


def test_the_buffer_sums_per_source_and_domain_and_drains_once() -> None:
    buffer = CountsBuffer()
    first = apply_change(None, doc("a", 1))
    buffer.add(change_counts(doc("a", 1), first))
    buffer.add(change_counts(doc("a", 1), None, "stale_version"))
    buffer.add(parse_failure_counts("malformed_json"))
    out = buffer.drain(now=9.0)
    assert [(c.source, c.domain, c.counts, c.at) for c in out] == [
        ("crm", "sales", {"received": 2, "new": 1, "dead_lettered.stale_version": 1}, 9.0),
        ("unknown", "unknown", {"received": 1, "dead_lettered.malformed_json": 1}, 9.0)]
    assert buffer.drain() == []
