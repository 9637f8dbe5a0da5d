"""The scale-out harness reads each worker's partitions back from the table Faust logs."""

from __future__ import annotations

from faust.types import TP
from faust.worker import _partition_set_logtable  # the formatter of the worker's log line
from hypothesis import given
from hypothesis import strategies as st

from scripts.benchlib.scale import last_assignment, parse_partitions

TOPICS = ("docs.normalized.v1", "chunks.embedded.v1", "search.requests.v1")
assignments = st.dictionaries(st.sampled_from(TOPICS),
                              st.sets(st.integers(0, 63), min_size=1), max_size=3)


def joined(generation: int) -> str:
    return (f"[2026-12-02 00:24:11,042] [7231] [INFO] Joined group 'streamrag-x' (generation "
            f"{generation}) with member_id faust-0.15.3-abc ")


def assigned(topics: dict[str, set[int]]) -> str:
    """The line aiokafka logs after a join, its set rendered the way Faust renders it."""
    tps = {TP(t, p) for t, parts in topics.items() for p in parts}
    table = _partition_set_logtable(tps) if tps else "set()"
    return (f"[2026-12-02 00:24:11,044] [7231] [INFO] Setting newly assigned partitions "
            f"{table} for group streamrag-x ")


@given(assignments, st.integers(0, 1000))
def test_the_logged_table_reads_back_as_the_assignment(topics: dict[str, set[int]],
                                                       generation: int) -> None:
    log = "\n".join([joined(generation), assigned(topics), "[...] [INFO] Worker ready"])
    assert last_assignment(log) == (generation, topics)


def test_the_last_join_counts_and_a_revocation_after_it_means_none() -> None:
    first, second = {"docs.normalized.v1": {0, 1, 2, 3}}, {"docs.normalized.v1": {1, 3}}
    log = "\n".join([joined(1), assigned(first), joined(2), assigned(second)])
    assert last_assignment(log) == (2, second)
    revoked = log + "\n[...] [INFO] Revoking previously assigned partitions {...} for group x"
    assert last_assignment(revoked) is None
    assert last_assignment(joined(0)) is None  # joined, nothing assigned yet


@given(st.sets(st.integers(0, 200), min_size=1))
def test_partition_ranges_parse_back(parts: set[int]) -> None:
    rendered = _partition_set_logtable({TP("t", p) for p in parts})
    cell = rendered.split("| t ", 1)[1].split("{", 1)[1].split("}", 1)[0]
    assert parse_partitions(cell) == parts
