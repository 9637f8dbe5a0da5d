"""A record that stops its stage the same way again and again is dead-lettered, across restarts."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import AsyncMock

import pytest
from aiokafka.errors import KafkaConnectionError, MessageSizeTooLargeError
from faust.exceptions import ProducerSendError

from shared.errors import InfrastructureError
from shared.worker import poison
from shared.worker.boundary import Boundary


def event(offset: int = 7) -> SimpleNamespace:
    message = SimpleNamespace(topic="t.v1", partition=1, offset=offset, key=b"k",
                              value=b"payload text")
    return SimpleNamespace(message=message)


def restart(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """A fresh process's journal, read from the file the last one left; its exits."""
    monkeypatch.setattr(poison, "journal", poison.FailureJournal(path))
    return []


def attempt(boundary: Boundary, exc: BaseException, offset: int = 7) -> None:
    async def main() -> None:
        async with boundary.record(event(offset)):
            raise exc

    asyncio.run(main())


def letters(dlq: SimpleNamespace) -> list[dict]:
    return [json.loads(c.kwargs["value"]) for c in dlq.send.await_args_list]


def test_the_third_same_failure_across_restarts_is_dead_lettered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, dlq = tmp_path / poison.FAILURES_FILE, SimpleNamespace(send=AsyncMock())
    for _ in range(poison.MAX_FAILURES - 1):
        exits = restart(path, monkeypatch)
        with pytest.raises(OSError):
            attempt(Boundary("chunking", dlq, on_fatal=exits.append), OSError(36, "too long"))
        assert [type(e) for e in exits] == [OSError]  # stopped: the record replays
    exits = restart(path, monkeypatch)
    attempt(Boundary("chunking", dlq, on_fatal=exits.append), OSError(36, "too long"))
    assert exits == []  # the partition moves on
    [letter] = letters(dlq)
    assert (letter["stage"], letter["reason"], letter["detail"], letter["offset"]) == (
        "chunking", "repeated_failure", "chunking: OSError", 7)
    # Dealt with: nothing left to count, only a mark to skip a replay of it for a while
    # (the worker may stop before it commits past the record).
    [entry] = json.loads(path.read_text()).values()
    assert entry["skip"] is True and entry["dead_lettered_at"] > 0
    assert poison.journal.skipped("t.v1", 1, 7) == "chunking|t.v1|1|7"


def test_a_dead_lettered_record_replayed_is_skipped_without_a_second_letter_for_a_while(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker stopped before committing past it: the replay must neither fail it three
    more times nor dead-letter it twice; after DEAD_LETTERED_KEEP_S the mark goes."""
    path, dlq = tmp_path / poison.FAILURES_FILE, SimpleNamespace(send=AsyncMock())
    for _ in range(poison.MAX_FAILURES):
        exits = restart(path, monkeypatch)
        with contextlib.suppress(OSError):  # the first two stop the worker
            attempt(Boundary("chunking", dlq, on_fatal=exits.append), OSError(36, "too long"))
    assert dlq.send.await_count == 1
    restart(path, monkeypatch)  # it died before the commit: the record replays
    key = poison.journal.skipped("t.v1", 1, 7)
    assert key == "chunking|t.v1|1|7"
    asyncio.run(Boundary("chunking", dlq).give_up(key, event()))
    assert dlq.send.await_count == 1  # skipped, not dead-lettered again
    later = poison.FailureJournal()
    later.entries = dict(poison.journal.entries)
    later._prune(now=poison.journal.entries[key]["dead_lettered_at"]
                 + poison.DEAD_LETTERED_KEEP_S + 1)
    assert later.entries == {}


def test_a_different_error_or_another_record_starts_the_count_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, dlq = tmp_path / poison.FAILURES_FILE, SimpleNamespace(send=AsyncMock())
    exits = restart(path, monkeypatch)
    boundary = Boundary("embedding", dlq, on_fatal=exits.append)
    for exc, offset in [(OSError(), 7), (MemoryError(), 7), (OSError(), 7), (OSError(), 8)]:
        with pytest.raises((OSError, MemoryError)):
            attempt(boundary, exc, offset)
    assert len(exits) == 4 and dlq.send.await_count == 0
    assert poison.journal.entries["embedding|t.v1|1|7"] == {"error": "OSError", "count": 1}


@pytest.mark.parametrize("exc", [
    InfrastructureError("ledger node down"), KafkaConnectionError(), TimeoutError(),
    ConnectionResetError(),
])
def test_the_environment_failing_is_never_the_records_fault(
        exc: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dlq = SimpleNamespace(send=AsyncMock())
    exits = restart(tmp_path / poison.FAILURES_FILE, monkeypatch)
    for _ in range(poison.MAX_FAILURES + 1):
        with pytest.raises(type(exc)):
            attempt(Boundary("ledger", dlq, on_fatal=exits.append), exc)
    assert len(exits) == poison.MAX_FAILURES + 1 and dlq.send.await_count == 0


def test_a_transient_cause_anywhere_in_the_chain_counts_as_transient() -> None:
    def chained(cause: BaseException) -> BaseException:
        try:
            raise cause
        except BaseException as inner:
            outer = ProducerSendError("send failed")
            outer.__cause__ = inner
            return outer

    assert poison.is_transient(chained(KafkaConnectionError()))
    assert not poison.is_transient(chained(MessageSizeTooLargeError()))


def test_a_record_that_gets_through_is_forgotten(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path, dlq = tmp_path / poison.FAILURES_FILE, SimpleNamespace(send=AsyncMock())
    exits = restart(path, monkeypatch)
    with pytest.raises(OSError):
        attempt(Boundary("chunking", dlq, on_fatal=exits.append), OSError())

    async def ok() -> None:
        async with Boundary("chunking", dlq, on_fatal=exits.append).record(event()):
            pass

    asyncio.run(ok())
    assert json.loads(path.read_text()) == {}


def test_a_damaged_journal_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / poison.FAILURES_FILE
    path.write_text("{not json")
    assert poison.FailureJournal(path).entries == {}


def doc(offset: int, value: dict | bytes, key: bytes = b"doc-1") -> SimpleNamespace:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return SimpleNamespace(topic="t.v1", partition=0, offset=offset, key=key, value=raw)


def test_copies_share_an_identity_and_nothing_else_does() -> None:
    version = {"doc_id": "doc-1", "version": 3, "op": "upsert", "text": "x"}
    same = poison.identity(doc(1, {**version, "batch_id": "a"}))
    assert same == poison.identity(doc(9, {**version, "batch_id": "b", "text": "y"}))
    assert len({same,
                poison.identity(doc(1, {**version, "version": 4})),
                poison.identity(doc(1, {**version, "op": "delete"})),
                poison.identity(doc(1, version, key=b"doc-2")),
                poison.identity(doc(1, b'{"not": "a document"}')),
                poison.identity(doc(1, b"raw bytes")),
                poison.identity(doc(1, b"raw bytes", key=b"k2"))}) == 7
    # Not a document version: the bytes decide, whatever offset.
    assert poison.identity(doc(1, b"{bad json")) == poison.identity(doc(2, b"{bad json"))
    assert "doc-1" not in same and same.startswith("doc:")
