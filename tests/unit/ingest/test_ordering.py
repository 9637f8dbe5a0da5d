"""Ordering keys per input shape, through parse_raw as ingest builds them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.ordering import binlog_file_number, compare, pg_lsn
from services.ingest.settings import FieldMapping, IngestSettings
from shared.contract.records import Position
from shared.errors import InvalidInput

S = IngestSettings()
KAFKA_TS = 1_700_000_000.0


def position(obj: dict, headers: dict[str, bytes] | None = None,
             settings: IngestSettings = S) -> Position | None:
    raw = RawMessage(value=json.dumps(obj).encode(), timestamp=KAFKA_TS, headers=headers or {})
    return parse_raw(raw, settings, now=1.0).position


def placed(obj: dict, headers: dict[str, bytes] | None = None,
           settings: IngestSettings = S) -> Position:
    pos = position(obj, headers, settings)
    assert pos is not None
    return pos


def refused(obj: dict, headers: dict[str, bytes] | None = None,
            settings: IngestSettings = S) -> tuple[str, str | None]:
    with pytest.raises(InvalidInput) as err:
        position(obj, headers, settings)
    return err.value.reason, err.value.field


def cdc(source: dict, op: str = "u", ts_ms: int | None = 1_700_000_000_000,
        wrapped: bool = True) -> dict:
    row = {"id": 7, "body": "text"}
    body = {"op": op, "before": row if op == "d" else None, "after": None if op == "d" else row,
            "source": {"db": "shop", "table": "articles", **source}, "ts_ms": ts_ms}
    return {"payload": body} if wrapped else body


def test_postgres_orders_by_lsn_integer_or_text_form() -> None:
    pg = {"connector": "postgresql", "ts_ms": 5}
    assert position(cdc({**pg, "lsn": 24023928})) == Position(kind="pg_lsn", key=(24023928,))
    assert placed(cdc({**pg, "lsn": "16/B374D848"}, op="d")).key == (0x16B374D848,)
    # Text LSNs compare by value, not as strings: 0/FFFFFFFF comes before 1/0.
    assert pg_lsn("0/FFFFFFFF") < pg_lsn("1/0") < pg_lsn("A/0")
    assert pg_lsn("0/10") == 16


def test_mysql_orders_by_binlog_file_number_then_position_then_row() -> None:
    my = {"connector": "mysql"}
    got = position(cdc({**my, "file": "mysql-bin.000003", "pos": 154, "row": 2}))
    assert got == Position(kind="mysql_binlog", key=(3, 154, 2))
    assert placed(cdc({**my, "file": "mysql-bin.000003", "pos": 9}, wrapped=False)).key \
        == (3, 9, 0)
    # The suffix grows past its zero padding: string order would put 1000000 first.
    after = placed(cdc({**my, "file": "mysql-bin.1000000", "pos": 4}))
    before = placed(cdc({**my, "file": "mysql-bin.999999", "pos": 90_000}))
    assert compare(before, after) == -1 and compare(after, before) == 1
    assert binlog_file_number("binlog.000010") > binlog_file_number("binlog.000009")


def test_other_connectors_fall_back_to_ts_ms_then_event_time() -> None:
    assert position(cdc({"connector": "sqlserver", "ts_ms": 11})) == Position(
        kind="ts_ms", key=(11,))
    assert placed(cdc({"connector": "postgresql"}, ts_ms=12)).key == (12,)  # no lsn
    # No time from the source at all: the Kafka timestamp is no ordering key.
    assert position(cdc({}, ts_ms=None)) is None


@pytest.mark.parametrize(("source", "field"), [
    ({"connector": "postgresql", "lsn": "16-B3"}, "source.lsn"),
    ({"connector": "postgresql", "lsn": 1.5}, "source.lsn"),
    ({"connector": "postgresql", "lsn": -1}, "source.lsn"),
    ({"connector": "postgresql", "lsn": True}, "source.lsn"),
    ({"connector": "mysql", "file": "mysql-bin", "pos": 1}, "source.file"),
    ({"connector": "mysql", "file": "mysql-bin.0x1", "pos": 1}, "source.file"),
    ({"connector": "mysql", "file": 3, "pos": 1}, "source.file"),
    ({"connector": "mysql", "file": "mysql-bin.000001", "pos": "4"}, "source.pos"),
    ({"connector": "mysql", "file": "mysql-bin.000001", "pos": 4, "row": 2**63}, "source.row"),
    ({"connector": "oracle", "ts_ms": "soon"}, "source.ts_ms"),
])
def test_malformed_source_positions_are_refused(source: dict, field: str) -> None:
    assert refused(cdc(source)) == ("invalid_position", field)


def test_api_ticket_orders_by_updated_at_or_a_configured_version_path() -> None:
    tickets = {"streamrag-source": b"tickets"}
    rec = {"ticket": {"id": "T-1", "description": "D", "updated_at": "2026-11-28T14:05:00.25Z",
                      "rev": 41}}
    assert position(rec, tickets) == Position(
        kind="event_time", key=(1_795_874_700_250_000,))
    versioned = IngestSettings(api_mappings={"tickets": FieldMapping(
        id="ticket.id", text="ticket.description", event_time="ticket.updated_at",
        version="ticket.rev")})
    assert position(rec, tickets, versioned) == Position(kind="version", key=(41,))
    no_rev = {"ticket": {"id": "T-1", "description": "D"}}
    assert refused(no_rev, tickets, versioned) == ("missing_field", "ticket.rev")
    bad_rev = {"ticket": {"id": "T-1", "description": "D", "rev": "41"}}
    assert refused(bad_rev, tickets, versioned) == ("invalid_position", "ticket.rev")


def test_plain_document_orders_by_its_version_else_event_time() -> None:
    base = {"id": "a", "text": "t", "source": "s", "event_time": 1_700_000_123}
    assert position({**base, "version": 3}) == Position(kind="version", key=(3,))
    assert position(base) == Position(kind="event_time", key=(1_700_000_123_000_000,))
    assert position({"id": "a", "text": "t", "source": "s"}) is None  # Kafka time only
    assert placed({"id": "a", "source": "s", "op": "delete", "version": 4}).key == (4,)
    assert refused({**base, "version": 2.0}) == ("invalid_position", "version")
    assert refused({**base, "version": "3"}) == ("invalid_position", "version")


def test_positions_of_different_kinds_do_not_compare() -> None:
    assert compare(Position(kind="version", key=(1,)), Position(kind="ts_ms", key=(1,))) is None


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
       st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_text_lsn_order_is_numeric_order(hi1: int, lo1: int, hi2: int, lo2: int) -> None:
    a, b = pg_lsn(f"{hi1:X}/{lo1:X}"), pg_lsn(f"{hi2:X}/{lo2:X}")
    assert (a < b) == ((hi1, lo1) < (hi2, lo2)) and a == hi1 * 2**32 + lo1
