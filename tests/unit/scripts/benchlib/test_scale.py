"""The scale-out harness reads each worker's partitions from the broker's DescribeGroups
answer: the assignment bytes the group's leader (Faust's assignor) made for each member."""

from __future__ import annotations

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from hypothesis import given
from hypothesis import strategies as st

from scripts.benchlib.scale import members_assigned

TOPICS = ("docs.normalized.v1", "chunks.embedded.v1", "search.requests.v1")
assignments = st.dictionaries(st.sampled_from(TOPICS),
                              st.sets(st.integers(0, 63), min_size=1), max_size=3)


def member(topics: dict[str, set[int]]) -> tuple[str, str, str, bytes, bytes]:
    """One member as DescribeGroups lists it, its assignment encoded the way Faust's
    assignor sends it (topics sorted, Faust's own metadata in user_data)."""
    raw = ConsumerProtocolMemberAssignment(
        4, sorted((t, sorted(p)) for t, p in topics.items()), b'{"faust": 1}').encode()
    return ("faust-0.11.3-abc", "faust-0.11.3", "/127.0.0.1", b"", raw)


@given(st.lists(assignments, max_size=4))
def test_each_members_assignment_reads_back(topics: list[dict[str, set[int]]]) -> None:
    assert members_assigned([member(t) for t in topics]) == topics


def test_a_member_without_assignment_bytes_has_none() -> None:
    assert members_assigned([("m", "c", "h", b"", b"")]) == [{}]
