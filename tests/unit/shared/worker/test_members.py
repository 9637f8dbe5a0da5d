"""Workers of one stage sharing a data dir: each writes its own folder, a killed one is
found dead by its free lock (a real child process, killed with SIGKILL), its counters
survive it and what it died holding is counted once; the failure journal they share keeps
every worker's entries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from services.cli.status import counting_since, render_counts, stage_counts
from shared.worker import heartbeat, members, poison
from shared.worker.status_files import COUNTS_FILE, IN_HAND_FILE, PROGRESS_FILE

CHILD = """
import json, sys, time
from pathlib import Path
from shared.worker import members
from shared.worker.status_files import COUNTS_FILE, IN_HAND_FILE, PROGRESS_FILE
stage_dir, processed, started = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
me = members.join(stage_dir)
(me.folder / COUNTS_FILE).write_text(json.dumps({"redaction": {"processed": processed}}))
(me.folder / PROGRESS_FILE).write_text(json.dumps({"started_at": started, "stages": {}}))
(me.folder / IN_HAND_FILE).write_text(json.dumps(
    {"ended": False, "records": {"redaction|docs.normalized.v1|1|43": "ProcessDied"}}))
print(me.name, flush=True)
time.sleep(600)
"""


def worker(stage_dir: Path, processed: int, started: float) -> tuple[subprocess.Popen, str]:
    """Another worker process of the stage; its folder name once it has joined."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(stage_dir), str(processed),
                              str(started)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert child.stdout is not None
    name = child.stdout.readline().strip()
    assert name, "the child worker did not join"
    return child, name


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(30)


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> poison.FailureJournal:
    made = poison.FailureJournal(tmp_path / "stage" / poison.FAILURES_FILE)
    monkeypatch.setattr(poison, "journal", made)
    return made


def test_a_killed_worker_is_dead_its_counts_survive_and_its_records_are_counted_once(
        tmp_path: Path, journal: poison.FailureJournal) -> None:
    stage_dir = tmp_path / "stage"
    first, first_name = worker(stage_dir, 5, 1000.0)
    second, second_name = worker(stage_dir, 7, 2000.0)
    try:
        assert first_name != second_name  # one folder each: nothing shared to collide on
        folders = {p.name for p in (stage_dir / members.WORKERS_DIR).iterdir()}
        assert folders == {first_name, second_name}
        assert members.is_live(stage_dir / members.WORKERS_DIR / first_name)
        assert stage_counts(tmp_path)["redaction"]["processed"] == 12  # both, summed
        kill(first)
        assert not members.is_live(stage_dir / members.WORKERS_DIR / first_name)
        assert members.is_live(stage_dir / members.WORKERS_DIR / second_name)
        # Still counted while its folder waits for the next start to retire it.
        assert stage_counts(tmp_path)["redaction"]["processed"] == 12

        held = heartbeat.InHand()  # the restarted worker
        assert held.open(stage_dir) == []
        assert held.member is not None
        folders = {p.name for p in (stage_dir / members.WORKERS_DIR).iterdir()}
        assert folders == {second_name, held.member.name}  # the dead one's folder is gone
        assert journal.entries == {"redaction|docs.normalized.v1|1|43":
                                   {"error": "ProcessDied", "count": 1}}
        (held.member.folder / COUNTS_FILE).write_text(
            json.dumps({"redaction": {"processed": 1}}))
        assert stage_counts(tmp_path)["redaction"]["processed"] == 13  # 5 + 7 + 1
        assert counting_since(tmp_path) == 1000.0  # the first worker's start
        assert render_counts(stage_counts(tmp_path), 1000.0).startswith(
            "record counts since 1970-01-01T00:16:40Z")
        # The live second worker's folder and its in-hand records are not touched.
        assert (stage_dir / members.WORKERS_DIR / second_name / IN_HAND_FILE).exists()
        held.member.release()
    finally:
        for child in (first, second):
            if child.poll() is None:
                kill(child)


def test_a_retired_worker_is_not_counted_twice_while_its_folder_is_still_there(
        tmp_path: Path) -> None:
    stage_dir = tmp_path / "stage"
    folder = stage_dir / members.WORKERS_DIR / "host-9"
    folder.mkdir(parents=True)
    (folder / members.LOCK_FILE).touch()
    (folder / COUNTS_FILE).write_text(json.dumps({"chunking": {"processed": 4}}))
    (folder / PROGRESS_FILE).write_text(json.dumps({"started_at": 50.0}))
    members._retire_counters(stage_dir, folder)  # the reaper, stopped before the removal
    assert stage_counts(tmp_path) == {"chunking": {"processed": 4}}
    assert counting_since(tmp_path) == 50.0


def test_files_an_earlier_release_wrote_into_the_stage_dir_are_retired_once(
        tmp_path: Path, journal: poison.FailureJournal) -> None:
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    (stage_dir / COUNTS_FILE).write_text(json.dumps({"ingest": {"processed": 3}}))
    (stage_dir / IN_HAND_FILE).write_text(json.dumps(
        {"ended": False, "records": {"ingest|docs.raw.v1|0|9": "Hang"}}))
    held = heartbeat.InHand()
    held.open(stage_dir)
    assert not (stage_dir / COUNTS_FILE).exists() and not (stage_dir / IN_HAND_FILE).exists()
    assert stage_counts(tmp_path) == {"ingest": {"processed": 3}}
    assert journal.entries == {"ingest|docs.raw.v1|0|9": {"error": "Hang", "count": 1}}
    assert held.member is not None
    held.member.release()


def message(offset: int) -> SimpleNamespace:
    return SimpleNamespace(topic="t.v1", partition=0, offset=offset)


def test_workers_sharing_the_failure_journal_keep_each_others_entries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / poison.FAILURES_FILE
    mine, theirs = poison.FailureJournal(path), poison.FailureJournal(path)
    assert mine.failed("redaction", message(1), OSError()) == 1
    assert theirs.failed("redaction", message(2), OSError()) == 1  # read mine's first
    assert mine.failed("redaction", message(2), OSError()) == 2  # counts theirs on
    assert set(json.loads(path.read_text())) == {"redaction|t.v1|0|1", "redaction|t.v1|0|2"}
    # A skip one worker marks is seen by the other once the file changed.
    monkeypatch.setattr(poison, "REREAD_S", 0.0)
    theirs.dead_lettered("redaction|t.v1|0|3", now=time.time())
    assert mine.skipped("t.v1", 0, 3) == "redaction|t.v1|0|3"
