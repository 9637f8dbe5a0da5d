"""Ordering by source position, deduplication by content hash, and version numbering.

`apply_change` decides what one change does to a document given what ingest last applied
(the `doc_versions` table's record): a change at an older source position than the last
applied one is refused (`stale_version`, deletes included); one at the same position with
other content is a conflict (`version_conflict`); a repeat of the applied content is
dropped; anything else becomes the next version. Records written before positions were
kept, changes without a position (no source time), changes whose position is of another
kind (the document moved sources), and the change after an unpositioned one are ordered
by arrival as before.

Identity: a document id belongs to the source that wrote it first. A change from another
source is refused (`id_collision`) unless either side declared a shared id space (a
mapping's `id_space`, carried as `Document.shared_id`) or the document is deleted. And a
change that was applied before a crash and is replayed after later ones were applied is a
duplicate, not a stale change: the last `RECENT` applied (position, hash) pairs are kept
to tell the two apart. A table's truncate deletes the documents of its source that are
older than it (`truncated`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from services.ingest.ordering import compare
from shared.contract.forget import REQUEST, is_forget
from shared.contract.records import Document, Position, TableTruncate
from shared.errors import InvalidInput

RECENT = 16
TRUNCATE_HASH = "truncate"  # the content of a delete a table's truncate made


class SeenVersion(TypedDict):
    hash: str
    version: int
    # Position.model_dump(mode="json") of the newest position applied; absent in records
    # from before ordering, which any position then follows.
    position: NotRequired[dict[str, Any]]
    # Absent in records from before identities were kept.
    source: NotRequired[str]
    shared: NotRequired[bool]  # the id lives in a space sources share
    deleted: NotRequired[bool]  # the applied version is a delete
    # [kind, key, hash] of the newest applied changes with a position, newest last.
    recent: NotRequired[list[list[Any]]]
    # [partition, offset] on docs.parsed.v1 of the record whose change made this version.
    at: NotRequired[list[int]]
    # [request id, version] of the newest forgets applied (shared/contract/forget.py).
    forgets: NotRequired[list[list[Any]]]


@dataclass(frozen=True)
class Applied:
    doc: Document | None  # the versioned document to send on; None for a repeat
    state: SeenVersion  # what the table holds for the document afterwards


def apply_change(prev: SeenVersion | None, doc: Document,
                 at: tuple[int, int] | None = None) -> Applied:
    """The change's effect, or InvalidInput(stale_version / version_conflict); `at` is the
    record's (partition, offset) on docs.parsed.v1.

    A delete of a document never seen is still passed on: ingest state may be younger
    than the index, and deleting twice is harmless downstream. The very record whose
    change the table holds, read again (a replay after a crash: the table's changelog
    record can reach the broker before the version sent on, and the input is not
    committed until both have), is sent again at its version, never dropped as a repeat:
    its version may be nowhere downstream. A repeated version is harmless there.
    """
    if prev is None:
        new = doc.model_copy(update={"version": 1})
        return Applied(new, seen(new, at=at))
    if at is not None and prev.get("at") == list(at) and prev["hash"] == doc.content_hash:
        return Applied(doc.model_copy(update={"version": prev["version"], "source": prev.get(
            "source", doc.source)} if is_forget(doc) else {"version": prev["version"]}), prev)
    if is_forget(doc):
        return _forgotten(prev, doc, at)
    _check_identity(prev, doc)
    order = _order(prev, doc.position)
    if order is not None and order < 0:
        if _applied_before(prev, doc):
            return Applied(None, prev)  # a replay of what was applied: a duplicate
        raise InvalidInput("stale_version", "position", _detail(prev, doc))
    if prev["hash"] == doc.content_hash:
        # Same content: nothing to send, but remember a newer position so that changes
        # between the two are refused as stale.
        keep = order == 0 or doc.position is None
        return Applied(None, prev if keep else _at(prev, doc.position))
    if order == 0:
        raise InvalidInput("version_conflict", "position", _detail(prev, doc))
    new = doc.model_copy(update={"version": prev["version"] + 1})
    return Applied(new, seen(new, prev, at))


def _forgotten(prev: SeenVersion, doc: Document, at: tuple[int, int] | None) -> Applied:
    """A forget (shared/contract/forget.py) is the owner's delete at the next version,
    whatever source asked and whatever positions came before: never stale. A request
    applied already (a replay after later changes) is sent again at the version it had,
    which every stage takes as the stale delete it then is and redaction as the same
    forget (its keys are gone already): never a second forget of what came after it. The
    newest position stays, so a stale redelivery of an earlier change stays stale."""
    request = doc.metadata[REQUEST]
    source = prev.get("source", doc.source)
    done = {r: v for r, v in prev.get("forgets", [])}
    if request in done:
        return Applied(doc.model_copy(update={"version": done[request], "source": source}),
                       prev)
    new = doc.model_copy(update={"version": prev["version"] + 1, "source": source})
    state = seen(new, prev, at)
    if "position" in prev:
        state["position"] = prev["position"]
    state["forgets"] = [*prev.get("forgets", []), [request, new.version]][-RECENT:]
    return Applied(new, state)


def truncated(items: Iterable[tuple[str, SeenVersion]], cut: TableTruncate,
              here: Callable[[str], bool]) -> Iterator[tuple[Document, Applied]]:
    """The deletes a table's truncate makes: one per live document of its source whose id
    lives on this partition (`here`), unless the document changed after the truncate
    (a newer position: it was written again since; it stays)."""
    for doc_id, state in items:
        if state.get("source") != cut.source or state.get("deleted") or not here(doc_id):
            continue
        delete = Document(
            doc_id=doc_id, version=1, op="delete", source=cut.source, source_kind="cdc",
            event_time=cut.event_time, ingest_time=cut.ingest_time, position=cut.position,
            content_hash=TRUNCATE_HASH)
        try:
            yield delete, apply_change(state, delete)
        except InvalidInput:  # stale or at the same position: the row outlives the truncate
            continue


def seen(doc: Document, prev: SeenVersion | None = None,
         at: tuple[int, int] | None = None) -> SeenVersion:
    """The table's record once `doc` is applied (after `prev`; from the record at `at`)."""
    state: SeenVersion = {"hash": doc.content_hash, "version": doc.version,
                          "source": doc.source}
    if at is not None:
        state["at"] = list(at)
    if doc.shared_id or (prev is not None and prev.get("shared")):
        state["shared"] = True
    if doc.op == "delete":
        state["deleted"] = True
    recent = list(prev.get("recent", [])) if prev is not None else []
    if doc.position is not None:
        recent = [*recent, [doc.position.kind, list(doc.position.key), doc.content_hash]]
        state["recent"] = recent[-RECENT:]
    elif recent:
        state["recent"] = recent
    if prev is not None and prev.get("forgets"):
        state["forgets"] = list(prev["forgets"])  # a replayed forget stays the one it was
    return _at(state, doc.position)


def _at(state: SeenVersion, position: Position | None) -> SeenVersion:
    """`state` with `position` as the newest applied (none kept when it has none)."""
    out: SeenVersion = {**state}
    out.pop("position", None)
    if position is not None:
        out["position"] = position.model_dump(mode="json")
    return out


def _check_identity(prev: SeenVersion, doc: Document) -> None:
    """InvalidInput(id_collision) when `doc` writes an id another source owns."""
    owner = prev.get("source")
    if owner is None or owner == doc.source or prev.get("deleted"):
        return
    if doc.shared_id or prev.get("shared"):
        return
    raise InvalidInput("id_collision", "id", f"the id belongs to another source "
                       f"({len(owner)}-character name); a mapping's id_space may share it")


def _applied_before(prev: SeenVersion, doc: Document) -> bool:
    if doc.position is None:
        return False
    entry = [doc.position.kind, list(doc.position.key), doc.content_hash]
    return entry in prev.get("recent", [])


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
