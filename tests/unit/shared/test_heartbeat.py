"""A worker whose loop stops turning exits naming the record in hand; deaths are counted
against a record only when it was in hand at consecutive deaths; status shows a stalled
stage."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import AsyncMock

import faust
import pytest
from faust.exceptions import Skip

from services.cli.status import GroupStatus, lag_by_topic, render_progress, stage_progress
from shared.worker import boundary, heartbeat, members, poison
from shared.worker.boundary import Boundary, skip_exhausted
from shared.worker.status_files import PROGRESS_FILE


def message(offset: int = 7, topic: str = "t.v1") -> SimpleNamespace:
    """A distinct record at each offset (the same bytes at two offsets are copies)."""
    return SimpleNamespace(topic=topic, partition=1, offset=offset, key=b"k",
                           value=f"secret payload text {offset}".encode())


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> poison.FailureJournal:
    made = poison.FailureJournal(tmp_path / poison.FAILURES_FILE)
    monkeypatch.setattr(poison, "journal", made)
    return made


def die(held: heartbeat.InHand) -> None:
    """The worker's process ends: nothing more is written, the kernel drops its lock."""
    assert held.member is not None
    held.member.release()


def die_holding(directory: Path, *offsets: int, stage: str = "chunking") -> list[str]:
    """One worker's life: start (counting the dead ones' deaths), take records in hand,
    then die unannounced (kill -9: nothing more is written). What its start dead-lettered."""
    held = heartbeat.InHand()
    exhausted = held.open(directory)
    for offset in offsets:
        held.enter(stage, message(offset))
    die(held)
    return exhausted


def start(directory: Path) -> list[str]:
    held = heartbeat.InHand()
    exhausted = held.open(directory)
    assert held.open(directory) == []  # a second open in the same process counts nothing
    die(held)  # the next start in this test is another process's
    return exhausted


def in_hand_file(held: heartbeat.InHand) -> Path:
    assert held.member is not None
    return held.member.folder / heartbeat.IN_HAND_FILE


def test_a_blocked_loop_exits_naming_the_record_in_hand(
        tmp_path: Path, journal: poison.FailureJournal, caplog: pytest.LogCaptureFixture,
) -> None:
    held, fired = heartbeat.InHand(), threading.Event()
    held.open(tmp_path)
    settings = heartbeat.WatchdogSettings(loop_stall_s=0.2, check_interval_s=0.02)

    async def main() -> None:
        other = held.enter("ingest", message(3, "docs.raw.v1"))  # in hand, not running
        held.enter("chunking", message(7))
        beat = heartbeat.Heartbeat(asyncio.get_running_loop(), settings, held=held,
                                   exit_process=fired.set)
        beat.start()
        await asyncio.sleep(0)  # the first tick
        assert fired.wait(30)  # blocks the loop until the heartbeat gives up on it
        held.leave(other)

    with caplog.at_level(logging.CRITICAL, logger="shared.worker.heartbeat"):
        asyncio.run(main())
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    assert "chunking on t.v1/1@7" in line and "secret" not in line
    # Only the record the loop was stuck in is counted at the next start, as a Hang.
    marks = json.loads(in_hand_file(held).read_text())
    assert marks == {"ended": False, "records": {"chunking|t.v1|1|7": "Hang"}}
    die(held)
    start(tmp_path)
    assert journal.entries == {"chunking|t.v1|1|7": {"error": "Hang", "count": 1}}


def test_a_blocked_loop_with_nothing_in_hand_still_exits(tmp_path: Path,
                                                         journal: poison.FailureJournal) -> None:
    held, fired = heartbeat.InHand(), threading.Event()
    held.open(tmp_path)
    settings = heartbeat.WatchdogSettings(loop_stall_s=0.2, check_interval_s=0.02)

    async def main() -> None:
        heartbeat.Heartbeat(asyncio.get_running_loop(), settings, held=held,
                            exit_process=fired.set).start()
        await asyncio.sleep(0)
        assert fired.wait(30)

    asyncio.run(main())
    die(held)
    assert start(tmp_path) == [] and journal.entries == {}


def test_the_same_record_in_hand_at_consecutive_deaths_is_dead_lettered_on_sight(
        tmp_path: Path, journal: poison.FailureJournal) -> None:
    for _ in range(poison.MAX_FAILURES):
        assert die_holding(tmp_path, 7, 8) == []
    exhausted = start(tmp_path)
    assert sorted(exhausted) == ["chunking|t.v1|1|7", "chunking|t.v1|1|8"]
    assert journal.skipped("t.v1", 1, 7) == "chunking|t.v1|1|7"
    assert journal.skipped("t.v1", 1, 9) is None
    # The skip outlives another restart until the record is dead-lettered.
    assert poison.FailureJournal(tmp_path / poison.FAILURES_FILE).skipped("t.v1", 1, 8)


def test_unrelated_kills_never_make_a_record_a_poison_pill(
        tmp_path: Path, journal: poison.FailureJournal) -> None:
    """kill -9 during ordinary work finds a different record in hand each time."""
    for offset in (7, 7, 8, 7, 7, 9):
        assert die_holding(tmp_path, offset) == []
    assert start(tmp_path) == []
    assert journal.entries == {"chunking|t.v1|1|9": {"error": "ProcessDied", "count": 1}}


@pytest.mark.parametrize("between", ["idle death", "fatal exit", "handled"])
def test_anything_but_another_death_in_hand_breaks_the_run(
        between: str, tmp_path: Path, journal: poison.FailureJournal) -> None:
    for _ in range(poison.MAX_FAILURES - 1):
        die_holding(tmp_path, 7)
    held = heartbeat.InHand()
    held.open(tmp_path)
    if between == "idle death":
        pass  # killed holding nothing
    elif between == "fatal exit":  # the boundary counted the failure itself
        held.enter("chunking", message(7))
        held.known_exit({})
    else:
        held.leave(held.enter("chunking", message(7)))
        journal.forget("chunking", message(7))
    die(held)
    die_holding(tmp_path, 7)
    assert start(tmp_path) == []
    assert journal.entries["chunking|t.v1|1|7"]["count"] < poison.MAX_FAILURES


def test_a_clean_stop_counts_nothing(tmp_path: Path, journal: poison.FailureJournal) -> None:
    held = heartbeat.InHand()
    held.open(tmp_path)
    held.enter("chunking", message(7))
    held.ended()
    die(held)
    assert start(tmp_path) == [] and journal.entries == {}


def test_a_record_to_skip_is_dead_lettered_by_its_stage_and_never_handled(
        tmp_path: Path, journal: poison.FailureJournal, monkeypatch: pytest.MonkeyPatch,
) -> None:
    dlq = SimpleNamespace(send=AsyncMock())
    Boundary("stage-skip", dlq)
    for _ in range(poison.MAX_FAILURES):
        die_holding(tmp_path, 7, stage="stage-skip")
    start(tmp_path)
    event = SimpleNamespace(message=message(7))
    monkeypatch.setattr(boundary, "current_event", lambda: event)
    with pytest.raises(Skip):  # Faust acks a skipped event; no agent sees it
        asyncio.run(skip_exhausted(b"value"))
    [call] = dlq.send.await_args_list
    letter = json.loads(call.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["detail"], letter["offset"]) == (
        "stage-skip", "repeated_failure", "stage-skip: ProcessDied", 7)
    monkeypatch.setattr(boundary, "current_event", lambda: SimpleNamespace(message=message(8)))
    assert asyncio.run(skip_exhausted(b"value")) == b"value"
    # The worker dies at once on the next record (held: offset 8), before committing past 7:
    # 7 replays and is skipped again, with no second letter and no new count of deaths.
    die_holding(tmp_path, 8, stage="stage-skip")
    start(tmp_path)
    monkeypatch.setattr(boundary, "current_event", lambda: event)
    with pytest.raises(Skip):
        asyncio.run(skip_exhausted(b"value"))
    assert dlq.send.await_count == 1
    assert journal.entries["stage-skip|t.v1|1|8"]["count"] == 1


def redacted(offset: int, *, key: bytes = b"doc-1", version: int = 1,
             batch: str = "b1") -> SimpleNamespace:
    """A redacted document version as an upstream replay writes it again: another offset,
    another batch id, the same key and document version."""
    value = json.dumps({"doc_id": key.decode(), "version": version, "op": "upsert",
                        "text": "secret payload text", "batch_id": batch}).encode()
    return SimpleNamespace(topic="docs.redacted.v1", partition=0, offset=offset, key=key,
                           value=value)


def test_copies_of_a_record_given_up_go_on_sight_without_hanging_the_worker_again(
        tmp_path: Path, journal: poison.FailureJournal, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each death made one more copy upstream (offsets 11, 12): once the first is given up
    every copy is dead-lettered with its own letter, and no copy costs three more deaths."""
    dlq = SimpleNamespace(send=AsyncMock())
    Boundary("stage-copies", dlq)
    for life in range(poison.MAX_FAILURES):
        held = heartbeat.InHand()
        assert held.open(tmp_path) == []
        held.enter("stage-copies", redacted(10, batch=f"b{life}"))
        die(held)
    assert start(tmp_path) == ["stage-copies|docs.redacted.v1|0|10"]
    assert "secret" not in (tmp_path / poison.FAILURES_FILE).read_text()  # digests only

    def sees(msg: SimpleNamespace) -> bool:
        """True when the stream processor dead-lettered `msg` instead of passing it on."""
        monkeypatch.setattr(boundary, "current_event", lambda: SimpleNamespace(message=msg))
        try:
            asyncio.run(skip_exhausted(b"value"))
        except Skip:
            return True
        return False

    assert [sees(redacted(o, batch=f"c{o}")) for o in (10, 11, 12)] == [True] * 3
    assert [letter["offset"] for letter in
            (json.loads(c.kwargs["value"]) for c in dlq.send.await_args_list)] == [10, 11, 12]
    # Not copies: the next version, another document with the same bytes, another topic.
    other_topic = redacted(13)
    other_topic.topic = "chunks.v1"
    assert not any(sees(m) for m in (redacted(13, version=2), redacted(14, key=b"doc-2"),
                                     other_topic))
    # A replay of a copy (the worker stopped before committing past it) gets no second
    # letter; a new worker reads the same marks from the file.
    monkeypatch.setattr(poison, "journal", poison.FailureJournal(tmp_path / poison.FAILURES_FILE))
    assert sees(redacted(11, batch="again")) and dlq.send.await_count == 3


def test_a_mark_to_skip_outlives_deaths_that_did_not_reach_it(
        tmp_path: Path, journal: poison.FailureJournal) -> None:
    """Marked, then the worker dies on something else before the stream reaches it: still
    skipped, not hung on MAX_FAILURES more times."""
    for _ in range(poison.MAX_FAILURES):
        die_holding(tmp_path, 7)
    assert start(tmp_path) == ["chunking|t.v1|1|7"]
    die_holding(tmp_path, 3)
    start(tmp_path)
    assert journal.skipped("t.v1", 1, 7) == "chunking|t.v1|1|7"


def test_every_stream_of_the_app_checks_for_records_to_skip() -> None:
    app = faust.App("heartbeat-test", autodiscover=False)
    boundary._skip_exhausted_records(app)
    assert app.stream([]).info()["processors"] == [skip_exhausted]


def test_the_boundary_keeps_the_record_in_hand_while_inside(tmp_path: Path) -> None:
    held = heartbeat.InHand()
    held.open(tmp_path)
    dlq = SimpleNamespace(send=AsyncMock())

    async def main() -> None:
        async with Boundary("stage-hand", dlq).record(SimpleNamespace(message=message(5))):
            marks = json.loads(in_hand_file(held).read_text())
            assert marks["records"] == {"stage-hand|t.v1|1|5": "ProcessDied"}
            assert held.snapshot()["stage-hand"]["in_flight"] == 1

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(heartbeat, "in_hand", held)
        asyncio.run(main())
    assert json.loads(in_hand_file(held).read_text())["records"] == {}
    progress = held.snapshot()["stage-hand"]
    assert progress["in_flight"] == 0 and progress["last_progress"] is not None
    assert progress["topics"] == ["t.v1"]


def progress_file(directory: Path, stages: dict, written_at: float = 1000.0) -> None:
    """What this process's worker (live: it holds its folder's lock) last wrote."""
    members.own_file(directory / "app", PROGRESS_FILE).write_text(json.dumps(
        {"written_at": written_at, "started_at": 100.0, "stages": stages}))


def test_status_marks_a_stage_stalled_when_records_wait_and_none_is_handled(
        tmp_path: Path) -> None:
    progress_file(tmp_path, {
        "chunking": {"last_progress": 900.0, "in_flight": 0, "oldest_in_hand_s": 0,
                     "topics": ["docs.redacted.v1"]},
        "ingest": {"last_progress": 900.0, "in_flight": 0, "oldest_in_hand_s": 0,
                   "topics": ["docs.raw.v1"]},
        "ledger": {"last_progress": 990.0, "in_flight": 1, "oldest_in_hand_s": 70.0,
                   "topics": ["audit.batches.v1"]},
        "embedding": {"last_progress": None, "in_flight": 0, "oldest_in_hand_s": 0,
                      "topics": ["chunks.v1"]},
    })
    rows = [GroupStatus("chunking", 1, {"docs.redacted.v1": 4}, "Stable"),
            GroupStatus("embedding", 1, {"chunks.v1": 2}, "Stable")]
    shown = stage_progress(tmp_path, lag_by_topic(rows), now=1000.0, stalled_after_s=60)
    assert {s: p["stalled"] for s, p in shown.items()} == {
        "chunking": True,  # 4 waiting, nothing done for 100 s
        "ingest": False,  # idle, but nothing waits for it
        "ledger": True,  # one record in hand for 70 s
        "embedding": True,  # never handled one since its start at 100, 2 waiting
    }
    assert (shown["chunking"]["lag"], shown["chunking"]["idle_s"]) == (4, 100.0)
    table = render_progress(shown)
    assert [line.split()[-1] for line in table.splitlines()[1:]] == [
        "STALLED", "STALLED", "ok", "STALLED"]


def test_status_counts_a_silent_worker_as_making_no_progress(tmp_path: Path) -> None:
    progress_file(tmp_path, {"ledger": {"last_progress": 990.0, "in_flight": 1,
                                        "oldest_in_hand_s": 5.0, "topics": ["a.v1"]}},
                  written_at=990.0)
    shown = stage_progress(tmp_path, {}, now=1100.0, stalled_after_s=60)
    assert shown["ledger"]["oldest_in_hand_s"] == 115.0 and shown["ledger"]["stalled"]


def test_a_stage_idle_for_long_is_stalled_only_once_a_record_has_waited_stalled_after(
        tmp_path: Path) -> None:
    """Idle for an hour, then one record arrives: not stalled until it has waited the
    stalled-after time (it used to be flagged at once, the idle hour counted)."""
    progress_file(tmp_path, {"chunking": {"last_progress": 1000.0, "in_flight": 0,
                                          "oldest_in_hand_s": 0,
                                          "topics": ["docs.redacted.v1"]}},
                  written_at=4600.0)
    lag = {"docs.redacted.v1": 1}
    for now, waited, stalled in ((4610.0, 10.0, False), (4700.0, 100.0, True)):
        shown = stage_progress(tmp_path, lag, now=now, stalled_after_s=60,
                               waiting_since={"docs.redacted.v1": 4600.0})
        assert (shown["chunking"]["waited_s"], shown["chunking"]["stalled"]) == (
            waited, stalled)
    # Records that waited long but a worker handled one a moment ago: moving, not stalled.
    shown = stage_progress(tmp_path, lag, now=4700.0, stalled_after_s=60,
                           waiting_since={"docs.redacted.v1": 1000.0})
    assert shown["chunking"]["stalled"]  # idle 3700 s, the record waited 3700 s
    progress_file(tmp_path, {"chunking": {"last_progress": 4695.0, "in_flight": 0,
                                          "oldest_in_hand_s": 0,
                                          "topics": ["docs.redacted.v1"]}},
                  written_at=4699.0)
    shown = stage_progress(tmp_path, lag, now=4700.0, stalled_after_s=60,
                           waiting_since={"docs.redacted.v1": 1000.0})
    assert not shown["chunking"]["stalled"]


def test_an_ended_workers_progress_is_left_out_and_two_live_ones_are_summed(
        tmp_path: Path) -> None:
    """A killed extra worker's last file (one record in hand) must not keep the stage
    STALLED for ever: its partitions are another worker's now."""
    stage_dir = tmp_path / "streamrag-redaction"
    live = members.join(stage_dir)  # first: a join retires the dead workers it finds
    dead = stage_dir / members.WORKERS_DIR / "otherhost-1"
    dead.mkdir(parents=True)
    (dead / members.LOCK_FILE).touch()  # nobody holds it: the worker has ended
    (dead / PROGRESS_FILE).write_text(json.dumps({"written_at": 500.0, "started_at": 100.0,
        "stages": {"redaction": {"last_progress": 400.0, "in_flight": 1,
                                 "oldest_in_hand_s": 90.0, "topics": ["a.v1"]}}}))
    (live.folder / PROGRESS_FILE).write_text(json.dumps({
        "written_at": 1000.0, "started_at": 900.0,
        "stages": {"redaction": {"last_progress": 990.0, "in_flight": 2,
                                 "oldest_in_hand_s": 3.0, "topics": ["a.v1"]}}}))
    shown = stage_progress(tmp_path, {"a.v1": 5}, now=1000.0, stalled_after_s=60)
    assert (shown["redaction"]["workers"], shown["redaction"]["in_flight"],
            shown["redaction"]["stalled"]) == (1, 2, False)
    live.release()
