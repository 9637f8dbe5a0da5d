"""Records that stop their stage again and again: counted across restarts, then dead-lettered.

A fatal failure (shared/boundary.py) stops the worker so the record replays; if the record
itself causes it (an OSError from its content, a MemoryError, the broker refusing what it
made), it would stop the worker on every replay and hold its partition for good. So each
fatal failure is written down per stage, topic, partition and offset, with the error's
type, in a small JSON file under the worker's data dir (it must outlive the process); the
MAX_FAILURES-th time a record fails the same way it is dead-lettered `repeated_failure`
instead (detail: the stage and the error type) and the partition moves on.

Failures that say the environment is down, not the record (InfrastructureError: the
ledger node, the model; connection errors, timeouts, Kafka errors marked retriable,
anywhere in the exception's chain) are never counted: the record is fine and must wait.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from shared.errors import InfrastructureError

log = logging.getLogger(__name__)
FAILURES_FILE = "record-failures.json"
MAX_FAILURES = 3
MAX_ENTRIES = 1000  # the file stays small: the oldest entries go first
REPEATED_FAILURE = "repeated_failure"


def is_transient(exc: BaseException) -> bool:
    """True when the failure (or one it was raised from) is the environment's."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, InfrastructureError | ConnectionError | TimeoutError) or \
                getattr(current, "retriable", False):
            return True
        current = current.__cause__ or current.__context__
    return False


def record_key(stage: str, message: Any) -> str:
    return f"{stage}|{message.topic}|{message.partition}|{message.offset}"


class FailureJournal:
    """Fatal failures per record, in memory and (once `open`ed) in a file."""

    def __init__(self, path: Path | None = None, max_failures: int = MAX_FAILURES) -> None:
        self.path = path
        self.max_failures = max_failures
        self.entries: dict[str, dict[str, Any]] = {}
        if path is not None:
            self.open(path)

    def open(self, path: Path) -> None:
        """Read the failures an earlier run of this worker wrote down."""
        self.path = path
        try:
            loaded = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:  # a damaged file costs at most a few replays
            log.warning("record failure journal %s unreadable (%s): starting afresh", path,
                        type(exc).__name__)
            return
        if isinstance(loaded, dict):
            self.entries.update({k: v for k, v in loaded.items() if isinstance(v, dict)})

    def failed(self, stage: str, message: Any, exc: BaseException) -> int:
        """Write down a fatal failure of the record; how many times in a row it has failed
        with this error type (0: transient, not counted)."""
        if is_transient(exc):
            return 0
        key, error = record_key(stage, message), type(exc).__name__
        entry = self.entries.pop(key, None)  # re-inserted last: the newest
        count = entry["count"] + 1 if entry and entry.get("error") == error else 1
        self.entries[key] = {"error": error, "count": count}
        while len(self.entries) > MAX_ENTRIES:
            del self.entries[next(iter(self.entries))]
        self._save()
        return count

    def exhausted(self, count: int) -> bool:
        return count >= self.max_failures

    def forget(self, stage: str, message: Any) -> None:
        """The record is dealt with (dead-lettered): its entry goes."""
        if self.entries.pop(record_key(stage, message), None) is not None:
            self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.entries))
        with open(tmp, "rb") as handle:  # the process exits right after: make it stick
            os.fsync(handle.fileno())
        tmp.replace(self.path)


journal = FailureJournal()  # one worker per process; export_counts opens its file
