"""Parsing every input kind into a Document, and refusing bad input with a reason."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.settings import IngestSettings
from shared.contract.codec import decode, encode
from shared.contract.records import Document
from shared.errors import InvalidInput
from tests.hostile import Raw, hostile_record

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
    assert (doc.doc_id, doc.text, doc.title, doc.source) == ("shop.articles/7", "Body text",
                                                             "T", "cdc:shop.articles")
    assert doc.event_time == 1_700_000_000.0 and doc.source_kind == "cdc"
    gone = parse_raw(msg({"op": "d", "before": row, "after": None, "source": src}), S)
    assert gone.op == "delete" and gone.doc_id == "shop.articles/7"


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
    ({"id": "a", "text": "t", "source": ""}, ("missing_field", "source")),
    ({"id": "a", "text": "t", "source": " \t"}, ("missing_field", "source")),
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


@pytest.mark.parametrize(("value", "expected"), [
    (b"[" * 100_000 + b"]" * 100_000, ("too_deep", None)),
    (b'{"a":' * 3000 + b"1" + b"}" * 3000, ("too_deep", None)),
    (b'{"id": ' + b"7" * 5000 + b', "text": "t", "source": "s"}', ("number_too_large", None)),
    (b'{"id": "a", "text": "t", "source": "s", "event_time": 1e999}',
     ("number_too_large", None)),
    (b'{"id": "a", "text": "t", "source": "s", "event_time": NaN}',
     ("non_finite_number", None)),
    (b'{"id": "a", "text": "t", "source": "s", "x": -Infinity}', ("non_finite_number", None)),
    (b'{"id": "a", "text": "bad \\ud800 half", "source": "s"}', ("invalid_unicode", "text")),
    (b'{"id": "a", "text": "t", "source": "s", "metadata": {"\\udfff": 1}}',
     ("invalid_unicode", "metadata")),
    (b'{"id": "a", "text": "\xed\xa0\x80", "source": "s"}', ("not_utf8", None)),
    ({"schema_version": True, "id": "a", "text": "t", "source": "s"},
     ("wrong_type", "schema_version")),
    ({"schema_version": 1.0, "id": "a", "text": "t", "source": "s"},
     ("wrong_type", "schema_version")),
    ({"schema_version": [1], "id": "a", "text": "t", "source": "s"},
     ("wrong_type", "schema_version")),
    ({"id": 42, "text": "t", "source": "s"}, ("wrong_type", "id")),
    ({"id": "a", "text": 42, "source": "s"}, ("wrong_type", "text")),
    ({"id": "a", "text": "t", "source": 1.5}, ("wrong_type", "source")),
    ({"id": "a", "text": "t", "source": "s", "op": ["delete"]}, ("wrong_type", "op")),
    ({"id": "a", "text": "t", "source": "s", "event_time": 1e16},
     ("event_time_out_of_range", "event_time")),
    ({"id": "a", "text": "t", "source": "s", "event_time": -1e13},
     ("event_time_out_of_range", "event_time")),
    ({"id": "a", "text": "t", "source": "s", "event_time": "0001-01-01T00:00:00Z"},
     ("event_time_out_of_range", "event_time")),
    ({"id": "a", "text": "t", "source": "s", "event_time": "0001-01-01T00:00:00+14:00"},
     ("event_time_out_of_range", "event_time")),
    ({"id": "a", "text": "t", "source": "s", "event_time": "2100-01-01T00:00:00Z"},
     ("event_time_out_of_range", "event_time")),
    ({"id": "   ", "text": "t", "source": "s"}, ("invalid_id", "id")),
    ({"id": "a\u200bb", "text": "t", "source": "s"}, ("invalid_id", "id")),
    ({"id": "a\nb", "text": "t", "source": "s"}, ("invalid_id", "id")),
    ({"id": "x" * 513, "text": "t", "source": "s"}, ("id_too_long", "id")),
    ({"id": "a", "text": "t", "source": "s", "metadata": {"k": [1]}},
     ("wrong_type", "metadata[#0]")),
    ({"op": ["c"], "before": None, "after": {"id": 1, "body": "b"}}, ("wrong_type", "op")),
    ({"op": "c", "before": None, "after": {"id": 1.5, "body": "b"}}, ("wrong_type", "after.id")),
    ({"op": "c", "before": None, "after": {"id": True, "body": "b"}},
     ("wrong_type", "after.id")),
    ({"op": "c", "before": None, "after": {"id": 1, "body": 7}}, ("wrong_type", "after.body")),
    ({"op": "c", "before": None, "after": {"id": 1, "body": "b"}, "source": {"table": [1]}},
     ("wrong_type", "source.table")),
    ({"op": "c", "before": None, "after": {"id": 1, "body": "b"}, "ts_ms": 1e20},
     ("event_time_out_of_range", "ts_ms")),
])
def test_strict_contract_reasons(value: object, expected: tuple[str, str | None]) -> None:
    big = IngestSettings(max_payload_bytes=1_048_576)
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    with pytest.raises(InvalidInput) as err:
        parse_raw(RawMessage(value=raw, timestamp=KAFKA_TS, headers={}), big, now=1.0)
    assert (err.value.reason, err.value.field) == expected


@pytest.mark.parametrize(("rec", "field", "expected"), [
    ({"ticket": {"id": 5, "description": "D"}}, None, ("api:tickets", "5")),
    ({"ticket": {"id": "T", "description": ["D"]}}, "ticket.description", None),
    ({"ticket": {"id": "T", "description": "D", "updated_at": "9999-01-01T00:00:00Z"}},
     "ticket.updated_at", None),
    ({"ticket": {"id": "T", "description": "D", "priority": {"p": 1}}}, "ticket.priority", None),
])
def test_api_mapping_types(rec: dict, field: str | None,
                           expected: tuple[str, str] | None) -> None:
    m = msg(rec, headers={"streamrag-source": b"tickets"})
    if expected is not None:
        doc = parse_raw(m, S)
        assert (doc.source, doc.doc_id) == expected
        return
    with pytest.raises(InvalidInput) as err:
        parse_raw(m, S)
    assert err.value.field == field


@pytest.mark.parametrize("header", [b"\xff\xfe", None, b"tick\x00ets"])
def test_a_bad_source_header_is_its_own_reason(header: bytes | None) -> None:
    m = RawMessage(value=b'{"a": 1}', timestamp=KAFKA_TS, headers={"streamrag-source": header})
    with pytest.raises(InvalidInput) as err:
        parse_raw(m, S)
    assert err.value.reason == "invalid_header"


def test_the_kafka_timestamp_fallback_is_bounded_too() -> None:
    m = RawMessage(value=json.dumps({"id": "a", "text": "t", "source": "s"}).encode(),
                   timestamp=-5.0, headers={})
    with pytest.raises(InvalidInput) as err:
        parse_raw(m, S)
    assert (err.value.reason, err.value.field) == ("event_time_out_of_range", "timestamp")


def test_event_time_bounds_are_settings() -> None:
    narrow = IngestSettings(min_event_time="2020-01-01T00:00:00Z",
                            max_event_time="2030-01-01T00:00:00Z")
    m = msg({"id": "a", "text": "t", "source": "s", "event_time": "2019-12-31T23:59:59Z"})
    with pytest.raises(InvalidInput) as err:
        parse_raw(m, narrow)
    assert err.value.reason == "event_time_out_of_range"
    assert parse_raw(msg({"id": "a", "text": "t", "source": "s",
                          "event_time": "2029-12-31T00:00:00Z"}), narrow).event_time > 0


REASON = re.compile(r"[a-z][a-z0-9_]*")
MESH_LIKE = IngestSettings(max_payload_bytes=65536)


@given(hostile_record(), st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_record_is_a_valid_document_or_invalid_input(record: Raw, ts: float) -> None:
    value, _, headers = record
    m = RawMessage(value=value, timestamp=ts, headers=dict(headers))
    try:
        doc = parse_raw(m, MESH_LIKE, now=1.0)
    except InvalidInput as exc:  # anything else fails the test
        assert REASON.fullmatch(exc.reason)
        return
    assert decode(Document, encode(doc)) == doc  # it travels, and reads back the same
    assert doc.doc_id.strip() and doc.source
    assert MESH_LIKE.min_event_time.timestamp() <= doc.event_time
    assert doc.event_time < MESH_LIKE.max_event_time.timestamp()
