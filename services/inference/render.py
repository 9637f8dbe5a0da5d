"""Stored values a hit cannot be shown with: returned empty and counted, never failing an answer.

A retrieved hit carries what was stored, and ingest's checks may have been looser when it
was stored (or something wrote below ingest). An event time out of datetime's range, text
that is not valid Unicode (a lone surrogate), or a version beyond int64 would make building
the answer or its protobuf reply raise, and one such hit would fail every query retrieving
it. Each field that cannot be rendered is emptied ("" / 0) instead and reported by name;
an event time that has no ISO form keeps its number and gets an empty `event_time_iso`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from shared.contract.records import SearchHit

TEXT_FIELDS = ("chunk_id", "doc_id", "text", "title", "domain", "source")
INT64 = (-(2**63), 2**63 - 1)


def iso(ts: float) -> str:
    """The instant as ISO 8601 in UTC ("...Z"); "" when datetime cannot represent it."""
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return ""


def renderable_text(value: str) -> bool:
    """True when the text encodes as UTF-8 (protobuf strings must): no lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_hit(hit: SearchHit) -> tuple[SearchHit, tuple[str, ...]]:
    """The hit with every unrenderable field emptied, and the names of those fields."""
    empty: dict[str, object] = {f: "" for f in TEXT_FIELDS
                                if not renderable_text(getattr(hit, f))}
    if not INT64[0] <= hit.version <= INT64[1]:
        empty["version"] = 0
    named = tuple(empty)
    if not iso(hit.event_time):
        # The number as stored still travels (a double holds any); its ISO form, the one
        # readers use, cannot exist: citations carry it empty (api/convert.py uses iso).
        named += ("event_time",)
    if not empty:
        return hit, named
    return hit.model_copy(update=empty), named
