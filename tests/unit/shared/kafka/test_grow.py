"""Growing the document topics: the plan's refusals, the quiet check, and re-homing, whose
invariant is checked on random histories: afterwards each key's newest record sits at
partition_of(key, N) and nowhere else, no key is lost, no older version wins, and a re-run
(also after a crash part-way through the writes) changes nothing more. And the lag that
refuses a growth, and the saved form of a rewritten changelog's records."""

from __future__ import annotations

import json

import pytest
from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.contract.codec import decode, encode
from shared.contract.records import EmbeddedChunkSet
from shared.errors import InvalidInput
from shared.kafka import grow
from shared.kafka.grow import GroupState, Rec, Retire, Write, partition_of, rehome_writes


def test_partition_of_is_the_producers_default_partitioner() -> None:
    pick = DefaultPartitioner()
    for key in (b"doc-1", b"a", "données-é".encode(), b"m\0doc-9", b""):
        for n in (1, 4, 6, 7, 64):
            assert partition_of(key, n) == pick(key, list(range(n)), list(range(n)))
    # A fixed value, so a changed hash cannot pass by agreeing with itself.
    assert [partition_of(b"doc-1", 6), partition_of(b"doc-2", 6)] == \
        [pick(b"doc-1", list(range(6)), []), pick(b"doc-2", list(range(6)), [])]


def test_growing_most_keys_moves_them() -> None:
    keys = [f"doc-{i}".encode() for i in range(200)]
    moved = sum(partition_of(k, 4) != partition_of(k, 6) for k in keys)
    assert 100 < moved < 200  # why re-homing exists: a plain add strands most documents


def counts(n: int) -> dict[str, int]:
    return {t: n for t in grow.GROWN}


def test_plan_grows_every_topic_below_the_target() -> None:
    have = counts(4) | {grow.GROWN[0]: 6}  # one grown by an earlier, interrupted run
    steps = grow.plan(have, 6)
    assert [(s.topic, s.partitions, s.grows) for s in steps] == \
        [(t, have[t], have[t] < 6) for t in grow.GROWN]


def test_plan_refuses_to_shrink_and_names_the_topic() -> None:
    with pytest.raises(InvalidInput) as info:
        grow.plan(counts(8), 6)
    assert info.value.reason == "cannot_shrink"
    assert "docs.raw.v1 has 8" in str(info.value.detail)


def test_plan_refuses_missing_topics() -> None:
    have = counts(4)
    del have["chunks.v1"]
    with pytest.raises(InvalidInput) as info:
        grow.plan(have, 6)
    assert (info.value.reason, info.value.detail) == ("missing_topics", "chunks.v1")


def test_grown_topics_are_the_document_path_and_its_tables() -> None:
    assert set(grow.GROWN) == {
        "docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1", "chunks.v1",
        "chunks.embedded.v1", "search.requests.v1", "pii.subjects.v1",
        "streamrag-ingest-doc_versions-changelog",
        "streamrag-ingest-source_clocks-changelog"}
    assert "audit.batches.v1" not in grow.GROWN and "search.replies.v1" not in grow.GROWN
    # One record per key, so a worker recovering several partitions in any order (Faust's
    # memory store is one dict) ends with the newest state.
    assert set(grow.REHOMED) | set(grow.REWRITTEN) <= set(grow.GROWN)
    assert {"streamrag-ingest-doc_versions-changelog": grow.table_key} == grow.REWRITTEN
    assert {t: r.retire for t, r in grow.REHOMED.items()} == {
        "chunks.embedded.v1": "delete", "chunks.v1": "tombstone",
        "pii.subjects.v1": "tombstone"}  # each document's index record on one partition
    assert "streamrag-ingest-source_clocks-changelog" not in grow.REWRITTEN  # per partition
    assert {s.name for s in grow.grown_specs()} == set(grow.GROWN)


def test_quiet_problems_name_live_members_and_lag() -> None:
    problems = grow.quiet_problems([
        GroupState("streamrag-ingest", 1, {"docs.parsed.v1": 0}),
        GroupState("streamrag-embedding", 0, {"chunks.v1": 3}),
        GroupState("streamrag-chunking", None, {}),
        GroupState("streamrag-redaction", 0, {"docs.normalized.v1": 0}),
    ])
    assert problems == [
        "group streamrag-ingest has 1 live member(s): stop the mesh (a stopped worker counts "
        "until its session times out)",
        "group streamrag-embedding has 3 unconsumed record(s) on chunks.v1: let it drain",
        "group streamrag-chunking: the broker cannot say whether it has members",
    ]
    assert grow.quiet_problems([GroupState("g", 0, {"chunks.v1": 0})]) == []
    assert grow.quiet_problems([], ["onebox (pid 42)"]) == \
        ["worker onebox (pid 42) is running: stop the mesh"]


def test_group_lag_counts_every_partition_of_a_topic_the_group_consumes() -> None:
    committed = {("chunks.v1", 0): 5, ("chunks.v1", 1): 2, ("docs.raw.v1", 0): 9}
    starts = {("chunks.v1", 2): 3, ("chunks.v1", 3): 0, ("docs.raw.v1", 0): 0}
    ends = {("chunks.v1", 0): 5, ("chunks.v1", 1): 4, ("chunks.v1", 2): 10,
            ("chunks.v1", 3): 0, ("docs.raw.v1", 0): 9, ("docs.raw.v1", 1): 0,
            ("docs.parsed.v1", 0): 7}
    # chunks.v1: 0 on p0, 2 on p1, 7 on p2 (never committed: read from its start at 3),
    # 0 on the empty p3; docs.raw.v1 drained; docs.parsed.v1 is not the group's.
    assert grow.group_lag(committed, starts, ends) == {"chunks.v1": 9, "docs.raw.v1": 0}
    # A commit below a log start moved by retention: only what is still there is unread.
    assert grow.group_lag({("t", 0): 1}, {("t", 0): 4}, {("t", 0): 6}) == {"t": 2}
    assert grow.group_lag({}, starts, ends) == {}


writes_strategy = st.lists(st.builds(
    Write, st.integers(0, 63), st.binary(max_size=40), st.none() | st.binary(max_size=200),
    st.integers(0, 2**62),
    st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)), max_size=3).map(tuple),
    st.sampled_from(["copy", "retire"])), max_size=10)


@given(writes=writes_strategy)
def test_a_saved_write_reads_back_as_it_was(writes: list[Write]) -> None:
    lines = [grow.write_line(w) for w in writes]
    assert all("\n" not in line for line in lines)  # one record a line
    assert [grow.read_line(line) for line in lines] == writes
    # A tombstone stays a tombstone, an empty value stays empty.
    for value in (None, b""):
        w = Write(1, b"k", value, 0, (), "copy")
        assert grow.read_line(grow.write_line(w)).value == value


def embedded(doc_id: str, version: int, op: str = "upsert") -> bytes:
    return encode(EmbeddedChunkSet(doc_id=doc_id, version=version, op=op, source="s",
                                   domain="d", event_time=1.0, ingest_time=2.0,
                                   model_id="m", dim=3))


def table_value(version: int) -> bytes:
    return json.dumps({"hash": f"h{version}", "version": version}).encode()


def version_of(value: bytes, how: Retire) -> int:
    if how == "delete":
        return decode(EmbeddedChunkSet, value).version
    return int(json.loads(value)["version"])


def history(draw_keys: list[tuple[int, list[bool]]], old: int, how: Retire) -> list[Rec]:
    """Records as the producers left them under `old` partitions: each key's versions in
    order on partition_of(key, old), interleaved with other keys'. A False marks a delete
    (a contract delete for chunk sets, a tombstone for a changelog)."""
    records: list[Rec] = []
    ends: dict[int, int] = {}
    queue = [(f"doc-{k}", v + 1, live) for k, (_, lives) in enumerate(draw_keys)
             for v, live in enumerate(lives)]
    queue.sort(key=lambda item: (item[1], draw_keys[int(item[0][4:])][0]))
    for doc_id, version, live in queue:
        key = doc_id.encode()
        p = partition_of(key, old)
        ends[p] = ends.get(p, -1) + 1
        if how == "delete":
            value: bytes | None = embedded(doc_id, version, "upsert" if live else "delete")
        else:
            value = table_value(version) if live else None
        records.append(Rec(p, ends[p], key, value, 1000 + version))
    return records


def check_rehomed(records: list[Rec], new: int, how: Retire,
                  expect: dict[bytes, int | None]) -> None:
    newest = grow.newest_by_key(records)
    for key, version in expect.items():
        target = partition_of(key, new)
        at = newest[key]
        strays = [r for p, r in at.items() if p != target and not grow.retired(r, how)]
        assert not strays, f"{key!r} still live off its partition: {strays}"
        here = at.get(target)
        if version is None:  # deleted last: nothing live anywhere
            assert here is None or grow.retired(here, how)
        else:
            assert here is not None and here.value is not None
            assert not grow.retired(here, how)
            assert version_of(here.value, how) == version  # the newest, never an older one


keys_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.lists(st.booleans(), min_size=1, max_size=4)),
    min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(keys=keys_strategy, old=st.integers(1, 6), more=st.integers(1, 6),
       how=st.sampled_from(["delete", "tombstone"]), cut=st.floats(0, 1))
def test_rehoming_leaves_each_newest_record_on_its_new_partition(
        keys: list[tuple[int, list[bool]]], old: int, more: int, how: Retire,
        cut: float) -> None:
    new = old + more
    records = history(keys, old, how)
    expect = {f"doc-{k}".encode(): (len(lives) if lives[-1] else None)
              for k, (_, lives) in enumerate(keys)}
    writes = rehome_writes(records, new, how)
    kinds = [w.kind for w in writes]
    assert kinds == sorted(kinds)  # every copy before any retirement
    done = grow.apply_writes(records, writes)
    check_rehomed(done, new, how, expect)
    assert rehome_writes(done, new, how) == []  # a re-run changes nothing
    # A crash part-way through the writes, then a re-run from what the broker holds.
    part = grow.apply_writes(records, writes[:int(len(writes) * cut)])
    resumed = grow.apply_writes(part, rehome_writes(part, new, how))
    check_rehomed(resumed, new, how, expect)
    assert rehome_writes(resumed, new, how) == []


def test_a_deleted_document_is_not_moved() -> None:
    key = next(f"gone-{i}".encode() for i in range(100)
               if partition_of(f"gone-{i}".encode(), 4) != partition_of(f"gone-{i}".encode(), 6))
    p = partition_of(key, 4)
    records = [Rec(p, 0, key, embedded(key.decode(), 1)),
               Rec(p, 1, key, embedded(key.decode(), 2, "delete"))]
    assert rehome_writes(records, 6, "delete") == []


def test_a_moved_shard_record_is_retired_by_a_delete_of_the_same_version() -> None:
    key = next(f"doc-{i}".encode() for i in range(100)
               if partition_of(f"doc-{i}".encode(), 4) != partition_of(f"doc-{i}".encode(), 6))
    old = partition_of(key, 4)
    writes = rehome_writes([Rec(old, 7, key, embedded(key.decode(), 3), 5)], 6, "delete")
    assert [(w.kind, w.partition) for w in writes] == \
        [("copy", partition_of(key, 6)), ("retire", old)]
    assert decode(EmbeddedChunkSet, writes[0].value).version == 3
    retired = decode(EmbeddedChunkSet, writes[1].value)
    assert (retired.op, retired.version, retired.chunks) == ("delete", 3, ())


def test_a_newer_record_already_on_the_target_wins_over_the_stray() -> None:
    key = next(f"doc-{i}".encode() for i in range(100)
               if partition_of(f"doc-{i}".encode(), 4) != partition_of(f"doc-{i}".encode(), 6))
    old, target = partition_of(key, 4), partition_of(key, 6)
    records = [Rec(old, 0, key, table_value(2), 10), Rec(target, 0, key, table_value(3), 20)]
    writes = rehome_writes(records, 6, "tombstone")
    assert [(w.kind, w.partition, w.value) for w in writes] == [("retire", old, None)]


def test_a_table_key_routes_by_the_doc_id_its_event_was_keyed_by() -> None:
    # Faust writes a str table key as JSON, on the partition of the event that wrote it.
    assert grow.table_key(b'"doc-7"') == b"doc-7"
    assert grow.table_key(json.dumps("dönër").encode()) == "dönër".encode()
    assert grow.table_key(b"not json") == b"not json"
    assert grow.table_key(b"12") == b"12"  # not a str key: its bytes as they are


@settings(max_examples=100, deadline=None)
@given(keys=keys_strategy, old=st.integers(1, 6), more=st.integers(0, 6))
def test_a_rewritten_changelog_holds_each_live_key_once_on_its_doc_ids_partition(
        keys: list[tuple[int, list[bool]]], old: int, more: int) -> None:
    new = old + more
    records = [Rec(r.partition, r.offset, json.dumps(r.key.decode()).encode(), r.value,
                   r.timestamp_ms) for r in history(keys, old, "tombstone")]
    writes = grow.rewrite_writes(records, new, grow.table_key)
    expect = {json.dumps(f"doc-{k}").encode(): len(lives)
              for k, (_, lives) in enumerate(keys) if lives[-1]}
    assert sorted(w.key for w in writes) == sorted(expect)  # each live key once, no deleted
    for w in writes:
        assert w.partition == partition_of(json.loads(w.key).encode(), new)
        assert w.value is not None and version_of(w.value, "tombstone") == expect[w.key]
