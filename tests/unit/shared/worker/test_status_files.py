"""Two workers sharing a data dir write the same files at once and never collide (both
wrote `stage-counters.tmp`; the second rename found it gone and crashed its worker)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from shared.worker import boundary, heartbeat, members, poison, status_files


def counters(path: Path) -> None:
    boundary.dump_counts(path)


def progress(path: Path) -> None:
    loop = asyncio.new_event_loop()
    try:
        heartbeat.Heartbeat(loop, heartbeat.WatchdogSettings(), path,
                            held=heartbeat.InHand()).write_progress(0.0)
    finally:
        loop.close()


def failures(path: Path) -> None:
    journal = poison.FailureJournal(path)
    journal.entries["stage|t|0|1"] = {"error": "OSError", "count": 1}
    journal._save()


def status(path: Path) -> None:
    status_files.write_json(path, {"sources": []})


WRITERS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "dump_counts": (status_files.COUNTS_FILE, counters),
    "write_progress": (status_files.PROGRESS_FILE, progress),
    "journal": (poison.FAILURES_FILE, failures),
    "write_json": (status_files.EVENT_TIME_FILE, status),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_another_worker_writing_between_write_and_rename_collides_with_nothing(
        writer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    name, write = WRITERS[writer]
    path = tmp_path / "streamrag-redaction" / name
    path.parent.mkdir()
    real, renames = os.replace, []

    def replace(src: str | Path, dst: str | Path) -> None:
        renames.append(Path(src).name)
        if len(renames) == 1:
            write(path)  # the other worker: its whole write, between this one's two steps
        real(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with caplog.at_level(logging.WARNING):
        write(path)
    assert len(renames) == 2 and renames[0] != renames[1]  # a temporary file each
    assert "cannot write" not in caplog.text  # the heartbeat logs what it could not write
    json.loads(path.read_text())
    assert [p.name for p in path.parent.iterdir()] == [name]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "stage-counters.json"
    path.write_text("{}")

    def full(src: str | Path, dst: str | Path) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        status_files.replace_file(path, '{"new": 1}')
    assert path.read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_temporary_files_are_not_read_as_a_workers_file(tmp_path: Path) -> None:
    stage_dir = tmp_path / "streamrag-ingest"
    own = members.own_file(stage_dir, status_files.EVENT_TIME_FILE)
    status_files.write_json(own, [1])
    (own.parent / f".{status_files.EVENT_TIME_FILE}.x1y2.tmp").write_text("{")
    found = members.files(tmp_path, status_files.EVENT_TIME_FILE, live_only=True)
    assert [(w.worker, w.live, w.value) for w in found] == [(members.worker_name(), True, [1])]
