"""tests/support/commits.py's check, on made-up samples: it flags a commit that passed an
input record whose output (or dead letter) was not on the broker yet, and only that."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from shared.contract.records import DeadLetter
from shared.contract.topics import DEADLETTER, DOCS_NORMALIZED, DOCS_REDACTED
from tests.support.commits import Flow, Sample, passed

FLOW = Flow("streamrag-redaction", DOCS_NORMALIZED, DOCS_REDACTED)
SRC, OUT, DLQ = (DOCS_NORMALIZED.name, 0), (DOCS_REDACTED.name, 1), (DEADLETTER.name, 0)


def record(tp: tuple[str, int], offset: int, doc: str | None) -> Any:
    value = json.dumps({"doc_id": doc, "version": 1}).encode() if doc else b'{"doc_id": '
    return SimpleNamespace(topic=tp[0], partition=tp[1], offset=offset, value=value)


# docs.normalized.v1/0: a@0, a record that does not parse @1 (dead-lettered at
# deadletter.v1/0@3), c@2; their outputs at docs.redacted.v1/1@5 (a) and @6 (c).
SOURCES = [record(SRC, 0, "a"), record(SRC, 1, None), record(SRC, 2, "c")]
OUTPUTS = [record(OUT, 5, "a"), record(OUT, 6, "c")]
DEAD = [(DLQ, 3, DeadLetter(stage="redaction", reason="malformed_json",
                            source_topic=SRC[0], partition=0, offset=1,
                            payload_sha256="0" * 64, payload_size=11, at=0.0))]


def check(committed: int, out_end: int, dlq_end: int) -> list[str]:
    sample = Sample(1.0, {FLOW.group: {SRC: committed}}, {OUT: out_end, DLQ: dlq_end})
    return passed(FLOW, [sample], SOURCES, OUTPUTS, DEAD)


def test_a_commit_over_records_whose_output_or_dead_letter_was_there_passes() -> None:
    assert check(3, 7, 4) == []
    assert check(1, 6, 0) == []  # only offset 0 is covered: its output (@5) was there


def test_a_commit_over_a_record_whose_output_came_later_is_flagged() -> None:
    [early] = check(3, 6, 4)  # c's output @6 was not on the broker at that commit
    assert "@3" in early and "offset 2 (('c', 1))" in early


def test_a_commit_over_a_record_dead_lettered_later_is_flagged() -> None:
    [early] = check(2, 7, 3)  # the dead letter @3 was not on the broker yet
    assert "offset 1 (None)" in early


def test_a_record_dead_lettered_twice_counts_from_its_first_letter() -> None:
    """A replayed record is dead-lettered again (at-least-once): the commit after the first
    letter landed is not early, though the second copy came later."""
    again = DEAD[0][2].model_copy()
    twice = [*DEAD, (DLQ, 4, again)]
    sample = Sample(1.0, {FLOW.group: {SRC: 2}}, {OUT: 7, DLQ: 4})
    assert passed(FLOW, [sample], SOURCES, OUTPUTS, twice) == []
    sample = Sample(1.0, {FLOW.group: {SRC: 2}}, {OUT: 7, DLQ: 3})
    [early] = passed(FLOW, [sample], SOURCES, OUTPUTS, twice)
    assert "letters at [(('deadletter.v1', 0), 3), (('deadletter.v1', 0), 4)]" in early
