"""Ordering by source position, duplicate suppression and version numbering."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.ingest.dedup import SeenVersion, apply_change, seen
from shared.contract.records import Document, Op, Position
from shared.errors import InvalidInput


def doc(h: str, op: Op = "upsert", *, at: int | None = None, doc_id: str = "d",
        kind: str = "pg_lsn") -> Document:
    position = None if at is None else Position(kind=kind, key=(at,))  # type: ignore[arg-type]
    return Document(doc_id=doc_id, version=1, op=op, text="t" if op == "upsert" else "",
                    source="s", event_time=0, ingest_time=0, content_hash=h, position=position)


def stored(state: SeenVersion) -> SeenVersion:
    """The state as the table's JSON changelog gives it back after a restart."""
    return json.loads(json.dumps(state))  # type: ignore[no-any-return]


def reason_of(prev: SeenVersion, change: Document) -> str:
    with pytest.raises(InvalidInput) as info:
        apply_change(prev, change)
    return info.value.reason


def test_first_version_is_one_then_increments() -> None:
    first = apply_change(None, doc("a", at=1))
    assert first.doc is not None and first.doc.version == 1
    second = apply_change(first.state, doc("b", at=2))
    assert second.doc is not None and second.doc.version == 2
    assert second.state == {"hash": "b", "version": 2, "source": "s",
                            "position": {"kind": "pg_lsn", "key": [2]},
                            "recent": [["pg_lsn", [1], "a"], ["pg_lsn", [2], "b"]]}


def test_repeat_is_dropped_but_a_return_to_old_content_is_not() -> None:
    first = apply_change(None, doc("a", at=1))
    repeat = apply_change(first.state, doc("a", at=1))
    assert repeat.doc is None and repeat.state == first.state
    second = apply_change(first.state, doc("b", at=2))
    third = apply_change(second.state, doc("a", at=3))
    assert third.doc is not None and third.doc.version == 3


def test_an_older_change_is_stale_and_a_delete_older_than_the_last_upsert_too() -> None:
    state = apply_change(None, doc("b", at=20)).state
    assert reason_of(stored(state), doc("a", at=10)) == "stale_version"
    assert reason_of(stored(state), doc("gone", op="delete", at=19)) == "stale_version"
    delete = apply_change(stored(state), doc("gone", op="delete", at=21))
    assert delete.doc is not None and (delete.doc.op, delete.doc.version) == ("delete", 2)


def test_equal_position_with_other_content_is_a_conflict() -> None:
    state = apply_change(None, doc("a", at=5)).state
    assert reason_of(stored(state), doc("b", at=5)) == "version_conflict"


def test_same_content_at_a_newer_position_moves_the_position_so_the_gap_is_stale() -> None:
    state = apply_change(None, doc("a", at=1)).state
    moved = apply_change(state, doc("a", at=3))
    assert moved.doc is None and moved.state["position"]["key"] == [3]
    assert reason_of(moved.state, doc("b", at=2)) == "stale_version"


def test_records_without_positions_and_kind_changes_follow_arrival_order() -> None:
    legacy: SeenVersion = {"hash": "a", "version": 4}  # written before positions were kept
    nxt = apply_change(legacy, doc("b", at=1))
    assert nxt.doc is not None and nxt.doc.version == 5
    moved = apply_change(nxt.state, doc("c", at=0, kind="ts_ms"))
    assert moved.doc is not None and moved.doc.version == 6
    assert moved.state["position"] == {"kind": "ts_ms", "key": [0]}
    unpositioned = apply_change(moved.state, doc("c"))
    assert unpositioned.doc is None and unpositioned.state == moved.state


def test_a_change_without_position_applies_by_arrival_and_so_does_the_next() -> None:
    state = apply_change(None, doc("a", at=5)).state
    unplaced = apply_change(state, doc("b"))  # no source time: arrival order
    assert unplaced.doc is not None and unplaced.doc.version == 2
    assert "position" not in unplaced.state
    after = apply_change(unplaced.state, doc("c", at=3))
    assert after.doc is not None and after.doc.version == 3
    assert reason_of(after.state, doc("d", at=2)) == "stale_version"


def test_delete_of_unknown_document_still_flows() -> None:
    out = apply_change(None, doc("del", op="delete", at=1))
    assert out.doc is not None and out.doc.op == "delete"


# Each document has versions at distinct positions 0..n-1, with contents from a small set so
# that equal content at different positions (a return to old content) occurs too.
_histories = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "del"]), min_size=1, max_size=6),
    min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), histories=_histories)
def test_any_interleaving_ends_at_the_newest_version_of_each_document(
        data: st.DataObject, histories: list[list[str]]) -> None:
    changes = [doc(h, "delete" if h == "del" else "upsert", at=pos, doc_id=f"d{i}")
               for i, hist in enumerate(histories) for pos, h in enumerate(hist)]
    repeats = data.draw(st.lists(st.sampled_from(changes), max_size=len(changes)))
    arrival = data.draw(st.permutations(changes + repeats))
    table: dict[str, SeenVersion] = {}
    applied: dict[str, list[Document]] = {}
    for change in arrival:
        try:
            out = apply_change(table.get(change.doc_id), change)
        except InvalidInput as exc:
            assert exc.reason == "stale_version"  # positions are distinct per content
            continue
        table[change.doc_id] = stored(out.state)
        if out.doc is not None:
            applied.setdefault(change.doc_id, []).append(out.doc)
    for i, hist in enumerate(histories):
        sent = applied[f"d{i}"]
        assert [d.version for d in sent] == list(range(1, len(sent) + 1))
        positions = [d.position.key for d in sent if d.position]
        assert positions == sorted(set(positions))  # never an older change after a newer
        # The last one sent carries the newest content (its position may be older when the
        # newest repeats the content already applied, which then needs no new version).
        assert sent[-1].content_hash == hist[-1]
        assert table[f"d{i}"]["position"]["key"] == [len(hist) - 1]
        assert table[f"d{i}"]["hash"] == hist[-1]


def test_seen_keeps_the_position_for_the_table() -> None:
    first = apply_change(None, doc("a", at=7)).doc
    assert first is not None
    assert seen(first) == {"hash": "a", "version": 1, "source": "s",
                           "position": {"kind": "pg_lsn", "key": [7]},
                           "recent": [["pg_lsn", [7], "a"]]}


@given(changes=st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 50),
                                  st.sampled_from(["upsert", "delete"])),
                        min_size=1, max_size=12),
       crash=st.integers(0, 11))
def test_a_replay_after_a_crash_sends_again_exactly_the_version_the_table_holds(
        changes: list[tuple[str, int, str]], crash: int) -> None:
    """Records at offsets 0..n-1 applied in order; a crash after record `crash` whose
    table record survived (changelog first) but whose sent version may not have: replaying
    from there sends that record's version again, the same content and number; every
    other record read again is what it was before (a repeat, stale, or a newer version)."""
    prev: SeenVersion | None = None
    states: list[SeenVersion | None] = []
    outputs: list[Document | None | str] = []
    for offset, (h, at, op) in enumerate(changes):
        try:
            applied = apply_change(prev, doc(h, op, at=at), at=(0, offset))  # type: ignore[arg-type]
        except InvalidInput as exc:
            outputs.append(exc.reason)
            states.append(prev)
            continue
        outputs.append(applied.doc)
        prev = applied.state
        states.append(prev)
    crash = min(crash, len(changes) - 1)
    table = states[crash]
    if table is None:
        return
    table = stored(table)  # as the changelog gives it back
    h, at, op = changes[crash]
    first = outputs[crash]
    if isinstance(first, str):  # refused the first time: refused again, for the same reason
        assert reason_of(table, doc(h, op, at=at)) == first  # type: ignore[arg-type]
        return
    replayed = apply_change(table, doc(h, op, at=at), at=(0, crash))  # type: ignore[arg-type]
    if isinstance(first, Document):  # it had sent a version: the replay sends it again
        assert replayed.doc is not None
        assert (replayed.doc.version, replayed.doc.content_hash, replayed.doc.op) == (
            first.version, first.content_hash, first.op)
        assert replayed.state == table
    else:  # it had sent nothing (a repeat): a replay sends nothing either
        assert replayed.doc is None
