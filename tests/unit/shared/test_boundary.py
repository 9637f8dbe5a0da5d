"""The shared error boundary: which failures dead-letter a record and which stop the worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import AsyncMock

import pytest
from aiokafka.errors import KafkaConnectionError

from shared.errors import InfrastructureError, InvalidInput
from shared.worker import members
from shared.worker.boundary import Boundary, counts, dump_counts, is_fatal
from shared.worker.status_files import COUNTS_FILE


def event(offset: int = 7) -> SimpleNamespace:
    message = SimpleNamespace(topic="t.v1", partition=1, offset=offset, key=b"k",
                              value=b"payload text")
    return SimpleNamespace(message=message)


def run_through(boundary: Boundary, exc: BaseException) -> None:
    async def main() -> None:
        async with boundary.record(event()):
            raise exc

    asyncio.run(main())


@pytest.mark.parametrize("exc", [InfrastructureError("x"), OSError(28, "No space left"),
                                 KafkaConnectionError(), MemoryError()])
def test_failures_that_are_not_the_records_stop_the_worker(exc: Exception) -> None:
    stopped: list[BaseException] = []
    dlq = SimpleNamespace(send=AsyncMock())
    boundary = Boundary("stage-fatal", dlq, on_fatal=stopped.append)
    with pytest.raises(type(exc)):
        run_through(boundary, exc)
    assert stopped == [exc] and is_fatal(exc)
    dlq.send.assert_not_awaited()  # nothing dead-lettered: the record replays after restart


@pytest.mark.parametrize("exc", [ValueError("v"), RecursionError(), KeyError("k"),
                                 UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogate")])
def test_record_level_failures_become_internal_error_dead_letters(exc: Exception) -> None:
    dlq = SimpleNamespace(send=AsyncMock())
    boundary = Boundary("stage-internal", dlq, on_fatal=pytest.fail)
    run_through(boundary, exc)
    letter = json.loads(dlq.send.await_args.kwargs["value"])
    assert (letter["reason"], letter["detail"], letter["offset"]) == (
        "internal_error", type(exc).__name__, 7)
    assert letter["payload_b64"] is None  # past ingest only the hash is kept


def test_invalid_input_keeps_its_own_reason_and_is_counted() -> None:
    dlq = SimpleNamespace(send=AsyncMock())
    run_through(Boundary("stage-invalid", dlq, keep_payload=True),
                InvalidInput("too_deep", detail="nested"))
    letter = json.loads(dlq.send.await_args.kwargs["value"])
    assert letter["reason"] == "too_deep" and letter["payload_b64"] is not None
    assert counts()["stage-invalid"] == {"processed": 1.0, "dead_lettered.too_deep": 1.0}


def test_a_dead_letter_that_cannot_be_sent_stops_the_worker() -> None:
    stopped: list[BaseException] = []
    dlq = SimpleNamespace(send=AsyncMock(side_effect=KafkaConnectionError()))
    with pytest.raises(KafkaConnectionError):
        run_through(Boundary("stage-dlq-down", dlq, on_fatal=stopped.append), ValueError())
    assert [type(e) for e in stopped] == [KafkaConnectionError]


def test_cancellation_passes_through_untouched() -> None:
    dlq = SimpleNamespace(send=AsyncMock())
    with pytest.raises(asyncio.CancelledError):
        run_through(Boundary("stage-cancel", dlq, on_fatal=pytest.fail),
                    asyncio.CancelledError())
    dlq.send.assert_not_awaited()


def test_counts_are_written_for_status(tmp_path: Path) -> None:
    dlq = SimpleNamespace(send=AsyncMock())
    run_through(Boundary("stage-dump", dlq), ValueError())
    path = tmp_path / "c.json"
    dump_counts(path)
    assert json.loads(path.read_text())["stage-dump"] == {
        "processed": 1.0, "dead_lettered.internal_error": 1.0,
        "internal_error.ValueError": 1.0}


def test_status_shows_what_workers_wrote(tmp_path: Path) -> None:
    from services.cli.status import render_counts, stage_counts

    dlq = SimpleNamespace(send=AsyncMock())
    run_through(Boundary("stage-status", dlq), KeyError("k"))
    run_through(Boundary("stage-status", dlq), InvalidInput("too_deep"))
    dump_counts(members.own_file(tmp_path / "some-app", COUNTS_FILE))
    shown = stage_counts(tmp_path)
    line = next(x for x in render_counts(shown).splitlines() if x.startswith("stage-status"))
    assert line.split()[1:4] == ["2", "2", "1"]
    assert line.endswith("internal_error=1, too_deep=1")


def test_by_default_a_fatal_failure_exits_the_process_without_a_clean_stop() -> None:
    script = """
import asyncio, logging, sys
from types import SimpleNamespace
from unittest.mock import AsyncMock
from shared.worker.boundary import Boundary
logging.basicConfig(stream=sys.stderr)
event = SimpleNamespace(message=SimpleNamespace(topic="t", partition=0, offset=3, key=None,
                                                value=b"v"))
async def main():
    async with Boundary("s", SimpleNamespace(send=AsyncMock())).record(event):
        raise OSError(28, "No space left on device /secret/path")
asyncio.run(main())
print("went on")
"""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert done.returncode == 70 and "went on" not in done.stdout
    assert "OSError" in done.stderr and "/secret/path" not in done.stderr
