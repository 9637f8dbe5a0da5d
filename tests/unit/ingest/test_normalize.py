"""Parsing every input kind into a Document, and refusing bad input with a reason."""

from __future__ import annotations

import json

import pytest

from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.settings import IngestSettings
from shared.errors import InvalidInput

S = IngestSettings(max_payload_bytes=4096)
KAFKA_TS = 1_700_000_000.0


def msg(obj: object, headers: dict[str, bytes] | None = None) -> RawMessage:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return RawMessage(value=raw, timestamp=KAFKA_TS, headers=headers or {})


def reason(obj: object, **kw: object) -> tuple[str, str | None]:
    with pytest.raises(InvalidInput) as err:
        parse_raw(msg(obj, **kw), S, now=1.0)  # type: ignore[arg-type]
    return err.value.reason, err.value.field


def test_plain_document() -> None:
    doc = parse_raw(msg({"id": "a", "text": "hi", "source": "s", "domain": "ops",
                         "event_time": "2026-01-01T00:00:00Z", "metadata": {"n": 3}}), S, now=5)
    assert (doc.doc_id, doc.text, doc.source, doc.domain) == ("a", "hi", "s", "ops")
    assert doc.event_time == 1767225600.0 and doc.ingest_time == 5
    assert doc.metadata == {"n": "3"} and doc.source_kind == "document"


def test_event_time_falls_back_to_kafka_timestamp_and_accepts_millis() -> None:
    assert parse_raw(msg({"id": "a", "text": "t", "source": "s"}), S).event_time == KAFKA_TS
    doc = parse_raw(msg({"id": "a", "text": "t", "source": "s", "event_time": 1.7e12}), S)
    assert doc.event_time == 1.7e9


def test_content_hash_depends_on_content_only() -> None:
    a = parse_raw(msg({"id": "a", "text": "t", "source": "s"}), S, now=1)
    b = parse_raw(msg({"id": "a", "text": "t", "source": "s"}), S, now=2)
    c = parse_raw(msg({"id": "a", "text": "u", "source": "s"}), S, now=1)
    assert a.content_hash == b.content_hash != c.content_hash


def test_plain_delete_clears_content() -> None:
    doc = parse_raw(msg({"id": "a", "source": "s", "op": "delete"}), S)
    assert doc.op == "delete" and doc.text == ""


def test_debezium_create_update_delete() -> None:
    src = {"db": "shop", "table": "articles"}
    row = {"id": 7, "title": "T", "body": "Body text"}
    doc = parse_raw(msg({"payload": {"op": "u", "before": None, "after": row, "source": src,
                                     "ts_ms": 1_700_000_000_000}}), S)
    assert (doc.doc_id, doc.text, doc.title, doc.source) == ("7", "Body text", "T",
                                                             "cdc:shop.articles")
    assert doc.event_time == 1_700_000_000.0 and doc.source_kind == "cdc"
    gone = parse_raw(msg({"op": "d", "before": row, "after": None, "source": src}), S)
    assert gone.op == "delete" and gone.doc_id == "7"


def test_api_json_by_header_mapping() -> None:
    rec = {"ticket": {"id": "T-1", "subject": "S", "description": "D", "priority": "high"}}
    doc = parse_raw(msg(rec, headers={"streamrag-source": b"tickets"}), S)
    assert (doc.doc_id, doc.title, doc.text, doc.domain) == ("T-1", "S", "D", "support")
    assert doc.metadata == {"priority": "high"} and doc.source == "api:tickets"


@pytest.mark.parametrize(("value", "expected"), [
    (b"{nope", ("malformed_json", None)),
    (b"\xff\xfe", ("not_utf8", None)),
    (b"", ("empty_value", None)),
    ([1, 2], ("not_an_object", None)),
    ({"id": "a", "source": "s"}, ("missing_field", "text")),
    ({"text": "t", "source": "s"}, ("missing_field", "id")),
    ({"id": "a", "text": ["x"], "source": "s"}, ("wrong_type", "text")),
    ({"id": "a", "text": "t", "source": "s", "metadata": "m"}, ("wrong_type", "metadata")),
    ({"id": "a", "text": "t", "source": "s", "event_time": "yesterday"},
     ("invalid_event_time", "event_time")),
    ({"id": "a", "text": "t", "source": "s", "event_time": "2026-01-01T00:00:00"},
     ("invalid_event_time", "event_time")),
    ({"id": "a", "text": "nul\x00", "source": "s"}, ("binary_content", "text")),
    ({"id": "a", "text": "   ", "source": "s"}, ("empty_text", "text")),
    ({"schema_version": 2, "id": "a", "text": "t", "source": "s"},
     ("unknown_schema_version", "schema_version")),
    ({"id": "a", "text": "t", "source": "s", "op": "merge"}, ("unknown_op", "op")),
    ({"id": "a", "text": "x" * 5000, "source": "s"}, ("payload_too_large", None)),
    ({"op": "x", "before": None, "after": {}}, ("unknown_op", "op")),
    ({"op": "c", "before": None, "after": {"id": 1}}, ("empty_text", "text")),
    ({"op": "c", "before": None, "after": None}, ("missing_field", "after")),
])
def test_bad_input_reasons(value: object, expected: tuple[str, str | None]) -> None:
    assert reason(value) == expected


def test_unknown_api_source_is_refused() -> None:
    assert reason({"a": 1}, headers={"streamrag-source": b"nobody"}) == (
        "unmapped_source", "streamrag-source")
