"""The query's time window: relative ("24h") or ISO 8601 bounds to epoch seconds."""

from __future__ import annotations

import re
from datetime import datetime

from shared.errors import InvalidInput

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


def parse_time(value: str, field: str, now: float) -> float | None:
    """Epoch seconds for `value`; None for an empty value (no bound).

    A relative value ("30m", "24h", "7d") means that long before `now`; an absolute one
    must carry its timezone, since a naive time would be read differently on every host.
    """
    text = value.strip()
    if not text:
        return None
    if text.lower() == "now":
        return now
    rel = _RELATIVE.fullmatch(text.lower())
    if rel:
        return now - float(rel.group(1)) * UNIT_SECONDS[rel.group(2)]
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        msg = f"{text[:40]!r} is neither relative (30m, 24h, 7d) nor ISO 8601"
        raise InvalidInput("bad_time", field, msg) from exc
    if when.tzinfo is None:
        msg = f"{text[:40]!r} has no timezone; add Z or an offset like +02:00"
        raise InvalidInput("naive_time", field, msg)
    return when.timestamp()


def parse_window(since: str, until: str, now: float) -> tuple[float | None, float | None]:
    """(since, until) in epoch seconds, either None when unbounded; until must not precede since."""
    start = parse_time(since, "since", now)
    end = parse_time(until, "until", now)
    if start is not None and end is not None and end < start:
        raise InvalidInput("until_before_since", "until", "until is earlier than since")
    return start, end
