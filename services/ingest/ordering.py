"""Ordering keys: where a change sits in its source's order, one rule per input shape.

Pure functions, no Kafka. Each builds a `Position` from a parsed input object or raises
InvalidInput(`invalid_position`) when the source's own position is malformed:

- Debezium: per connector (`source.connector`), Postgres `source.lsn` (an integer or the
  `XXX/YYY` hex text form); MySQL `source.file` + `source.pos` (+ `source.row`), where
  binlog files compare by their numeric suffix (`mysql-bin.1000000` follows
  `mysql-bin.999999`); any other connector, or one without its position, by `ts_ms`
  (`source.ts_ms`, else the envelope's), and by the mapped event time when there is none.
- API JSON: the mapping's `version` path (an integer) when it names one, else the event
  time (the mapped updated-at, e.g. `ticket.updated_at`).
- Plain document: its explicit integer `version` field, else its event time.

`event_time` arguments are None when the source gave no time (ingest then used the Kafka
record's timestamp): such a change gets no position and follows arrival order, since
producer timestamps collide within a millisecond and would turn quick updates into
conflicts. `compare` orders two positions of one kind; different kinds do not compare.
"""

from __future__ import annotations

import re
from typing import Any

from shared.contract.records import Position
from shared.errors import InvalidInput

MAX_VERSION = 2**63 - 1
_PG_TEXT_LSN = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")


def event_time_position(seconds: float | None) -> Position | None:
    """The event time in whole microseconds, so that equal times compare equal exactly;
    None without one (the record then follows arrival order)."""
    if seconds is None:
        return None
    return Position(kind="event_time", key=(round(seconds * 1_000_000),))


def compare(a: Position, b: Position) -> int | None:
    """-1, 0 or 1 as `a` is before, at or after `b`; None when their kinds differ."""
    if a.kind != b.kind:
        return None
    return (a.key > b.key) - (a.key < b.key)


def cdc_position(body: dict[str, Any], event_time: float | None) -> Position | None:
    """A Debezium change event's source position (`body` is the envelope's payload)."""
    source = body.get("source")
    src: dict[str, Any] = source if isinstance(source, dict) else {}
    connector = src.get("connector")
    if connector == "postgresql" and src.get("lsn") is not None:
        return Position(kind="pg_lsn", key=(pg_lsn(src["lsn"]),))
    if connector == "mysql" and src.get("file") is not None and src.get("pos") is not None:
        return Position(kind="mysql_binlog", key=(
            binlog_file_number(src["file"]), _count(src["pos"], "source.pos"),
            _count(src.get("row", 0), "source.row")))
    for where, ts in (("source.ts_ms", src.get("ts_ms")), ("ts_ms", body.get("ts_ms"))):
        if ts is not None:
            return Position(kind="ts_ms", key=(_count(ts, where),))
    return event_time_position(event_time)


def api_position(obj: dict[str, Any], version_path: str | None,
                 event_time: float | None) -> Position | None:
    """An API record's position: its mapped version when the mapping names one."""
    if version_path is None:
        return event_time_position(event_time)
    value: Any = obj
    for part in version_path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        raise InvalidInput("missing_field", version_path, "the mapping names a version path")
    return Position(kind="version", key=(_count(value, version_path),))


def plain_position(obj: dict[str, Any], event_time: float | None) -> Position | None:
    """A plain document's explicit `version`, else its event time."""
    if obj.get("version") is None:
        return event_time_position(event_time)
    return Position(kind="version", key=(_count(obj["version"], "version"),))


def pg_lsn(value: Any) -> int:
    """A Postgres LSN as one integer: Debezium sends an int64; `16/B374D848` is text form."""
    if isinstance(value, str):
        match = _PG_TEXT_LSN.fullmatch(value)
        if match is None:
            raise InvalidInput("invalid_position", "source.lsn", "not an LSN (XXX/YYY)")
        return (int(match[1], 16) << 32) | int(match[2], 16)
    return _count(value, "source.lsn")


def binlog_file_number(name: Any) -> int:
    """The numeric suffix of a MySQL binlog file name (`mysql-bin.000042` -> 42)."""
    if not isinstance(name, str):
        raise InvalidInput("invalid_position", "source.file",
                           f"expected string, got {type(name).__name__}")
    _, dot, suffix = name.rpartition(".")
    if not dot or not suffix.isascii() or not suffix.isdigit() or len(suffix) > 18:
        raise InvalidInput("invalid_position", "source.file", "no numeric binlog suffix")
    return int(suffix)


def _count(value: Any, field: str) -> int:
    """A non-negative integer that fits int64 (not a boolean, not a float)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("invalid_position", field,
                           f"expected an integer, got {type(value).__name__}")
    if not 0 <= value <= MAX_VERSION:
        raise InvalidInput("invalid_position", field, "outside 0 .. 2**63-1")
    return value
