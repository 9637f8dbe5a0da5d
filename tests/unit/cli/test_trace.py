"""`streamrag trace`: the hop table built from records as read (no broker)."""

from __future__ import annotations

import argparse
import json

from services.cli import trace
from services.cli.trace import (
    CommittedPast,
    Searchable,
    Seen,
    journeys,
    mentions,
    partition_of,
    render,
    verdict,
)
from shared.contract.codec import encode
from shared.contract.records import (
    ChunkSet,
    DeadLetter,
    Document,
    EmbeddedChunkSet,
    RedactedDocument,
)
from shared.kafka.offsets import Committed

DOC = "doc-1"
P = partition_of(DOC)
BASE = {"doc_id": DOC, "source": "s", "event_time": 1.0}


def _doc(version: int, ingest_ms: int, text: str = "hello", **kw: object) -> dict:
    return {**BASE, "version": version, "text": text, "ingest_time": ingest_ms / 1000,
            "content_hash": f"h-{text}", **kw}


def _sets(version: int, ingest_ms: int) -> tuple[bytes, bytes]:
    common = {**BASE, "version": version, "domain": "default", "ingest_time": ingest_ms / 1000}
    chunk = {"chunk_id": f"{DOC}#0", "ordinal": 0, "text": "hello", "token_count": 1}
    return (encode(ChunkSet(**common, chunks=(chunk,))),  # type: ignore[arg-type]
            encode(EmbeddedChunkSet(**common, model_id="m", dim=1,  # type: ignore[arg-type]
                                    chunks=({**chunk, "vector": ""},))))


def _version(version: int, start_ms: int, offset: int, text: str = "hello") -> list[Seen]:
    """One change's records, start_ms on docs.raw.v1; each hop 10 ms after the last but
    ingest (parse starts 4 ms after arrival) and redaction (batch of itself, 20 ms)."""
    ingest = start_ms + 4
    chunks, embedded = _sets(version, ingest)
    key = DOC.encode()
    parsed = Document(**_doc(1, ingest, text))  # type: ignore[arg-type]
    normalized = Document(**_doc(version, ingest, text))  # type: ignore[arg-type]
    batch = f"e/docs.normalized.v1/{P}/{offset}-{offset}"
    redacted = RedactedDocument(**_doc(version, ingest, text), batch_id=batch)  # type: ignore[arg-type]
    return [
        Seen("docs.raw.v1", 0, offset, start_ms, value=json.dumps({"id": DOC}).encode(), key=key),
        Seen("docs.parsed.v1", P, offset, start_ms + 10, value=encode(parsed), key=key),
        Seen("docs.normalized.v1", P, offset, start_ms + 20, value=encode(normalized), key=key),
        Seen("docs.redacted.v1", P, offset, start_ms + 40, value=encode(redacted), key=key),
        Seen("chunks.v1", P, offset, start_ms + 50, value=chunks, key=key),
        Seen("chunks.embedded.v1", P, offset, start_ms + 60, value=embedded, key=key),
    ]


def _dead(topic: str, source: Seen, stage: str, reason: str, at_ms: int) -> Seen:
    letter = DeadLetter(stage=stage, reason=reason, field="text", source_topic=source.topic,
                        partition=source.partition, offset=source.offset,
                        payload_sha256="0", payload_size=0, at=at_ms / 1000)
    return Seen(topic, 0, 0, at_ms, value=encode(letter))


def test_every_hop_to_searchable_with_what_is_measured() -> None:
    [j] = journeys(DOC, _version(1, 1_000_000, 0), Searchable(1_000_100, 1_000_090))
    assert [(h.source, h.target) for h in j.hops] == [
        ("docs.raw.v1", "docs.parsed.v1"), ("docs.parsed.v1", "docs.normalized.v1"),
        ("docs.normalized.v1", "docs.redacted.v1"), ("docs.redacted.v1", "chunks.v1"),
        ("chunks.v1", "chunks.embedded.v1"), ("chunks.embedded.v1", "searchable")]
    assert [h.total_ms for h in j.hops] == [10, 10, 20, 10, 10, 40]
    # Ingest: ingest_time says when parsing started; redaction: a batch of itself.
    assert (j.hops[0].waiting_ms, j.hops[0].working_ms) == (4, 6)
    assert (j.hops[2].waiting_ms, j.hops[2].working_ms) == (0, 20)
    assert "micro-batch of 1" in j.hops[2].note
    assert j.hops[1].waiting_ms is None and j.hops[4].working_ms is None
    assert (j.end, j.reached, j.version, j.end_to_end_ms) == ("searchable", "searchable", 1, 100)
    assert j.hops[-1].at_ms == 1_000_100
    assert "became searchable between" in j.hops[-1].note
    assert "dedup" in j.hops[1].note and "chunking" in j.hops[3].note


def test_a_redaction_batch_waits_for_its_last_record() -> None:
    records = _version(1, 1_000_000, 0)
    redacted = RedactedDocument(**_doc(1, 1_000_004), batch_id=f"e/t/{P}/0-1")  # type: ignore[arg-type]
    records[3] = Seen("docs.redacted.v1", P, 0, 1_000_040, value=encode(redacted), key=b"doc-1")
    records.append(Seen("docs.normalized.v1", P, 1, 1_000_032))  # another doc's, timestamp only
    hop = journeys(DOC, records)[0].hops[2]
    assert (hop.total_ms, hop.waiting_ms, hop.working_ms) == (20, 12, 8)
    assert "micro-batch of 2 (offsets 0-1)" in hop.note


def test_a_document_dead_lettered_by_ingest_says_why() -> None:
    raw = Seen("docs.raw.v1", 2, 7, 5_000, value=b'{"id": "doc-1", "text": ""}')  # unkeyed
    letter = _dead("deadletter.raw.v1", raw, "ingest", "empty_text", 5_030)
    [j] = journeys(DOC, [raw, letter])
    assert (j.end, j.reached, j.version) == ("dead_letter", "deadletter.raw.v1", None)
    assert j.reason == "ingest: empty_text (text)"
    assert [(h.source, h.target, h.total_ms) for h in j.hops] == [
        ("docs.raw.v1", "deadletter.raw.v1", 30)]
    assert verdict([j]) == j


def test_a_document_dead_lettered_past_ingest_stops_there() -> None:
    records = _version(1, 1_000_000, 0)[:4]  # chunking never sent chunks.v1
    records.append(_dead("deadletter.v1", records[3], "chunking", "internal_error", 1_000_045))
    [j] = journeys(DOC, records, Searchable(1_000_100))
    assert (j.end, j.reached) == ("dead_letter", "deadletter.v1")
    assert j.hops[-1].source == "docs.redacted.v1" and j.hops[-1].total_ms == 5
    assert "chunking: internal_error" in render(DOC, [j])


def test_two_versions_each_with_its_journey_and_only_the_newest_searchable() -> None:
    records = _version(1, 1_000_000, 0) + _version(2, 2_000_000, 1, text="changed")
    v1, v2 = journeys(DOC, records, Searchable(2_000_500))
    assert (v1.version, v1.end, v1.reached) == (1, "superseded", "chunks.embedded.v1")
    assert (v2.version, v2.end, v2.end_to_end_ms) == (2, "searchable", 500)
    assert all(h.at_ms >= 2_000_000 for h in v2.hops)
    assert "already served when first asked" in v2.hops[-1].note and v2.hops[-1].upper_bound
    assert "v2 (upsert): searchable, at most 500 ms end to end" in render(DOC, [v1, v2])
    assert verdict([v1, v2]) == v2


def test_a_repeat_is_dropped_and_does_not_decide_the_verdict() -> None:
    repeat = _version(9, 3_000_000, 2)[:2]  # same content as v1: dedup passes nothing on
    v1, again = journeys(DOC, _version(1, 1_000_000, 0) + repeat, Searchable(1_000_100))
    assert (again.end, again.version, again.reached) == ("dropped", None, "docs.parsed.v1")
    assert verdict([v1, again]) == v1


def test_in_flight_names_the_last_topic_reached() -> None:
    [j] = journeys(DOC, _version(1, 1_000_000, 0)[:5])
    assert (j.end, j.reached) == ("in_flight", "chunks.v1")
    assert "in flight, reached chunks.v1 after 50 ms" in render(DOC, [j])


def test_other_documents_records_are_ignored() -> None:
    assert journeys("doc-2", _version(1, 1_000_000, 0)) == []
    assert journeys("doc-", _version(1, 1_000_000, 0)) == []


def test_a_raw_payload_names_a_cdc_id_by_its_key_and_table() -> None:
    row = json.dumps({"payload": {"op": "c", "source": {"db": "shop", "table": "items"},
                                  "after": {"id": 42, "body": "a doc about item 42"}}}).encode()
    assert mentions(row, "shop.items/42")
    assert not mentions(row, "shop.orders/42")
    assert not mentions(b'{"id": "doc-10"}', "doc-1")  # a longer id is another document
    assert mentions(b'{"id": "doc-1"}', "doc-1")


def test_bad_arguments_exit_2() -> None:
    args = argparse.Namespace(doc_id=" ", version=None, timeout=5.0, target=None, json=False)
    assert trace.run(args) == 2
    assert trace.run(argparse.Namespace(**{**vars(args), "doc_id": "d", "timeout": 0})) == 2


def _past(topic: str, offset: int, group: str) -> dict[tuple[str, int], Committed]:
    return {(topic, P): Committed(group, offset)}


def test_a_change_its_stage_committed_past_without_output_is_lost() -> None:
    records = _version(1, 1_000_000, 4)[:3]  # redaction never sent docs.redacted.v1
    [j] = journeys(DOC, records, commits=_past("docs.normalized.v1", 5, "streamrag-redaction"))
    assert (j.end, j.reached) == ("lost", "docs.normalized.v1")
    assert j.lost == CommittedPast("redaction", "streamrag-redaction", "docs.normalized.v1",
                                   P, 4, 5)
    text = render(DOC, [j])
    assert (f"{DOC} v1 (upsert): lost: committed past at redaction: group streamrag-redaction "
            f"committed docs.normalized.v1/{P} to 5, past its record docs.normalized.v1/{P}@4"
            ) in text
    assert trace.as_json(DOC, [j])["journeys"][0]["lost"]["group"] == "streamrag-redaction"
    # Each stage that turns every record into an output or a dead letter is held to it.
    [j] = journeys(DOC, _version(1, 1_000_000, 4)[:5],
                   commits=_past("chunks.v1", 9, "streamrag-onebox"))
    assert (j.end, j.lost.stage if j.lost else None) == ("lost", "embedding")


def test_a_change_not_yet_passed_by_the_commit_is_in_flight() -> None:
    records = _version(1, 1_000_000, 4)[:3]
    [j] = journeys(DOC, records, commits=_past("docs.normalized.v1", 4, "streamrag-redaction"))
    assert (j.end, j.lost) == ("in_flight", None)
    # Another topic's or partition's commit says nothing about this record.
    [j] = journeys(DOC, records, commits=_past("docs.redacted.v1", 99, "streamrag-chunking"))
    assert j.end == "in_flight"
    [j] = journeys(DOC, records, commits={("docs.normalized.v1", P + 1):
                                          Committed("streamrag-redaction", 99)})
    assert j.end == "in_flight"


def test_a_dead_lettered_change_is_not_lost() -> None:
    records = _version(1, 1_000_000, 4)[:3]
    records.append(_dead("deadletter.v1", records[2], "redaction", "internal_error", 1_000_050))
    [j] = journeys(DOC, records, commits=_past("docs.normalized.v1", 5, "streamrag-redaction"))
    assert (j.end, j.lost) == ("dead_letter", None)


def test_an_output_compacted_away_by_a_newer_version_is_no_loss() -> None:
    v1 = _version(1, 1_000_000, 0)[:4]  # its chunks.v1 record compacted: v2 replaced it
    v2 = _version(2, 2_000_000, 1, text="changed")
    [old, new] = journeys(DOC, v1 + v2, commits=_past("docs.redacted.v1", 2,
                                                      "streamrag-chunking"))
    assert old.end == "in_flight" and new.end == "in_flight"
    # docs.redacted.v1 is not compacted: a newer version there does not excuse redaction.
    v1 = _version(1, 1_000_000, 0)[:3]
    [old, _] = journeys(DOC, v1 + v2, commits=_past("docs.normalized.v1", 2,
                                                    "streamrag-redaction"))
    assert old.end == "lost"
