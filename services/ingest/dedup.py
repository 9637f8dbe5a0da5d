"""Ordering by source position, deduplication by content hash, and version numbering.

`apply_change` decides what one change does to a document given what ingest last applied
(the `doc_versions` table's record): a change at an older source position than the last
applied one is refused (`stale_version`, deletes included); one at the same position with
other content is a conflict (`version_conflict`); a repeat of the applied content is
dropped; anything else becomes the next version. Records written before positions were
kept, changes without a position (no source time), changes whose position is of another
kind (the document moved sources), and the change after an unpositioned one are ordered
by arrival as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from services.ingest.ordering import compare
from shared.errors import InvalidInput
from shared.records import Document, Position


class SeenVersion(TypedDict):
    hash: str
    version: int
    # Position.model_dump(mode="json") of the newest position applied; absent in records
    # from before ordering, which any position then follows.
    position: NotRequired[dict[str, Any]]


@dataclass(frozen=True)
class Applied:
    doc: Document | None  # the versioned document to send on; None for a repeat
    state: SeenVersion  # what the table holds for the document afterwards


def apply_change(prev: SeenVersion | None, doc: Document) -> Applied:
    """The change's effect, or InvalidInput(stale_version / version_conflict).

    A delete of a document never seen is still passed on: ingest state may be younger
    than the index, and deleting twice is harmless downstream.
    """
    if prev is None:
        new = doc.model_copy(update={"version": 1})
        return Applied(new, seen(new))
    order = _order(prev, doc.position)
    if order is not None and order < 0:
        raise InvalidInput("stale_version", "position", _detail(prev, doc))
    if prev["hash"] == doc.content_hash:
        # Same content: nothing to send, but remember a newer position so that changes
        # between the two are refused as stale.
        keep = order == 0 or doc.position is None
        return Applied(None, prev if keep else _at(prev, doc.position))
    if order == 0:
        raise InvalidInput("version_conflict", "position", _detail(prev, doc))
    new = doc.model_copy(update={"version": prev["version"] + 1})
    return Applied(new, seen(new))


def seen(doc: Document) -> SeenVersion:
    return _at({"hash": doc.content_hash, "version": doc.version}, doc.position)


def _at(state: SeenVersion, position: Position | None) -> SeenVersion:
    """`state` with `position` as the newest applied (none kept when it has none)."""
    out: SeenVersion = {"hash": state["hash"], "version": state["version"]}
    if position is not None:
        out["position"] = position.model_dump(mode="json")
    return out


def _order(prev: SeenVersion, position: Position | None) -> int | None:
    """How the change's position compares to the applied one; None when they do not."""
    if position is None or "position" not in prev:
        return None
    return compare(position, Position.model_validate(prev["position"]))


def _detail(prev: SeenVersion, doc: Document) -> str:
    applied = prev.get("position", {})
    change = doc.position.key if doc.position else None
    return (f"{applied.get('kind')} {change} against applied {applied.get('key')}"
            f" (v{prev['version']})")
