"""Records that stop their stage again and again: counted across restarts, then dead-lettered.

A fatal failure (shared/worker/boundary.py) stops the worker so the record replays; if the record
itself causes it (an OSError from its content, a MemoryError, the broker refusing what it
made), it would stop the worker on every replay and hold its partition for good. So each
fatal failure is written down per stage, topic, partition and offset, with the error's
type, in a small JSON file under the worker's data dir (it must outlive the process); the
MAX_FAILURES-th time a record fails the same way it is dead-lettered `repeated_failure`
instead (detail: the stage and the error type) and the partition moves on.

Failures that say the environment is down, not the record (InfrastructureError: the
ledger node, the model; connection errors, timeouts, Kafka errors marked retriable,
anywhere in the exception's chain) are never counted: the record is fine and must wait.

A record can also stop the worker without raising: it blocks the event loop (the heartbeat,
shared/worker/heartbeat.py, ends the process and names it: `Hang`) or kills the process outright
(an out-of-memory kill, a segfault: `ProcessDied`). Those are counted from the records the
worker had in hand when it died (`after_death`), by a stricter rule, since an ordinary
`kill -9` also finds records in hand: a record is dead-lettered only when it was in hand at
MAX_FAILURES *consecutive* deaths of the worker, with the same cause each time. A death
that did not find it in hand (another record hung, a fatal error elsewhere, a kill while
idle) starts its count again, and so does handling it to the end. It cannot be
dead-lettered when it is reached again (handling it would hang or kill once more), so it
is marked `skip` and shared.worker.heartbeat's stream processor dead-letters it before any agent
sees it.

A dead-lettered record keeps its `skip` mark for DEAD_LETTERED_KEEP_S: the worker may stop
before it commits past the record (the next record hangs at once), and the replay must skip
it again (it is on the dead-letter topic already), not hang or fail MAX_FAILURES more times.
The mark then goes, so an offset reused by a re-created topic is never skipped for long.

A record can also come again at another offset: a stage upstream that died before its
commit writes its output again (at-least-once), and in one process the hang itself is such
a death, so every hang can make one more copy of the document that hangs. Each copy
counted from zero would cost MAX_FAILURES more hangs and could go on as long as copies
come. So a record in hand at a second death is written down with its `identity` (the same
document version, or the same key and bytes), and once it is given up every copy of it on
the same topic is dead-lettered on sight as well, each with its own letter, without
hanging the worker again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shared.errors import InfrastructureError
from shared.worker import members, status_files

log = logging.getLogger(__name__)
FAILURES_FILE = "record-failures.json"
MAX_FAILURES = 3
MAX_ENTRIES = 1000  # the file stays small: the oldest entries go first
REPEATED_FAILURE = "repeated_failure"
HANG = "Hang"  # the worker's event loop stopped turning while the record was in hand
PROCESS_DIED = "ProcessDied"  # the process ended unannounced (kill -9, OOM) with it in hand
DEATHS = frozenset({HANG, PROCESS_DIED})
DEAD_LETTERED_KEEP_S = 600.0  # many commit intervals: past it, the offset is committed
UNREACHED_KEEP_S = 86400.0  # a mark never reached (the topic re-created) goes in a day
REREAD_S = 1.0  # how often `skipped` looks whether another worker changed the file


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


def identity(message: Any) -> str:
    """What two records that are copies of one another share: the same key and the same
    document version ({doc_id, version, op} in a JSON value, as every stage after ingest
    writes; a replay upstream may change the rest, a batch id), or else the same key and
    value bytes. `kind:keydigest:digest`, digests only: the journal holds no document id
    or content."""
    value = message.value if isinstance(message.value, bytes) else b""
    try:
        data = json.loads(value) if value[:1] == b"{" else None
    except (ValueError, RecursionError):
        data = None
    digest = hashlib.blake2b(digest_size=16)
    if isinstance(data, dict) and isinstance(data.get("doc_id"), str) \
            and isinstance(data.get("version"), int):
        kind = "doc"
        digest.update(json.dumps([data["doc_id"], data["version"], data.get("op")]).encode())
    else:
        kind = "bytes"
        digest.update(value)
    return f"{kind}:{key_digest(message)}:{digest.hexdigest()}"


def key_digest(message: Any) -> str:
    """A digest of the record's key: copies share it, so only a record whose key matches
    a given-up one's is read whole for its `identity`."""
    key = message.key if isinstance(message.key, bytes) else b""
    return hashlib.blake2b(key, digest_size=8).hexdigest()


class FailureJournal:
    """Fatal failures per record, in memory and (once `open`ed) in a file that every worker
    of the stage shares: each change is made under the file's lock on what the file holds
    then (another worker's entries included) and written back at once, and a worker reads
    the others' newest entries when it asks whether to skip a record."""

    def __init__(self, path: Path | None = None, max_failures: int = MAX_FAILURES) -> None:
        self.path = path
        self.max_failures = max_failures
        self.entries: dict[str, dict[str, Any]] = {}
        # (topic, partition, offset) -> key of each record to dead-letter on sight
        self.skips: dict[tuple[str, int, int], str] = {}
        # (topic, key digest) -> {identity: key} of the records given up whose copies go
        # on sight too
        self.copies: dict[tuple[str, str], dict[str, str]] = {}
        self._read_at = 0.0  # monotonic time of the last look at the file
        self._mtime: int | None = None  # st_mtime_ns of the file as last read
        if path is not None:
            self.open(path)

    def open(self, path: Path) -> None:
        """Read the failures the stage's workers wrote down."""
        self.path = path
        self._reload()

    def _reload(self) -> None:
        """The file's entries replace those in memory (every change of ours is in it)."""
        assert self.path is not None
        self._read_at = time.monotonic()
        try:
            self._mtime = self.path.stat().st_mtime_ns
            loaded = json.loads(self.path.read_text())
        except FileNotFoundError:
            self._mtime = None
            return
        except (OSError, ValueError) as exc:  # a damaged file costs at most a few replays
            log.warning("record failure journal %s unreadable (%s): starting afresh",
                        self.path, type(exc).__name__)
            return
        if isinstance(loaded, dict):
            self.entries = {k: v for k, v in loaded.items() if isinstance(v, dict)}
        self._prune()
        self._index_skips()

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """One change: under the file's lock, on the file's newest entries, saved after."""
        if self.path is None:
            yield
            return
        with members.locked(self.path.with_name(self.path.name + ".lock")):
            self._reload()
            yield
            self._save()

    def failed(self, stage: str, message: Any, exc: BaseException) -> int:
        """Write down a fatal failure of the record; how many times in a row it has failed
        with this error type (0: transient, not counted)."""
        if is_transient(exc):
            return 0
        with self._changing():
            return self._count(record_key(stage, message), type(exc).__name__)

    def _count(self, key: str, error: str) -> int:
        entry = self.entries.pop(key, None)  # re-inserted last: the newest
        count = entry["count"] + 1 if entry and entry.get("error") == error else 1
        self.entries[key] = {"error": error, "count": count}
        while len(self.entries) > MAX_ENTRIES:
            del self.entries[next(iter(self.entries))]
        return count

    def after_death(self, in_hand: dict[str, str],
                    identities: dict[str, str] | None = None) -> list[str]:
        """Count the deaths of workers of the stage against the records they had in hand
        ({key: Hang or ProcessDied}, with the `identity` of those that were suspects
        already); the keys now to dead-letter on sight.

        A death that did not find a record in hand breaks that record's run: its Hang or
        ProcessDied count goes (fatal errors keep theirs, counted by `failed`; a record
        marked to skip is never in hand, and keeps its mark).
        """
        identities = identities or {}
        with self._changing():
            for key in [k for k, v in self.entries.items()
                        if v.get("error") in DEATHS and k not in in_hand
                        and not v.get("skip")]:
                del self.entries[key]
            self._prune()
            exhausted = []
            for key, error in in_hand.items():
                if self.already_dead_lettered(key):
                    continue  # skipped on sight, never in hand; kept as it is
                count = self._count(key, error)
                if isinstance(ident := identities.get(key), str):
                    self.entries[key]["id"] = ident
                if self.exhausted(count):
                    self.entries[key]["marked_at"] = time.time()
                if self.exhausted(count):
                    self.entries[key]["skip"] = True
                    exhausted.append(key)
            self._index_skips()
        return exhausted

    def skipped(self, topic: str, partition: int, offset: int) -> str | None:
        """The key of the record at topic/partition@offset if it is to be dead-lettered on
        sight (it hung or killed a worker MAX_FAILURES times running). Another worker may
        have marked it: the file is looked at again when it changed, once a second."""
        if self.path is not None and time.monotonic() - self._read_at >= REREAD_S:
            self._read_at = time.monotonic()
            try:
                changed = self.path.stat().st_mtime_ns != self._mtime
            except OSError:
                changed = False
            if changed:
                self._reload()
        return self.skips.get((topic, partition, offset))

    def copy_of(self, message: Any) -> str | None:
        """The key of a record given up of which `message` is a copy (another offset, the
        same `identity`), if any; None for the record itself."""
        given_up = self.copies.get((message.topic, key_digest(message)))
        if not given_up:
            return None
        key = given_up.get(identity(message))
        if key is None or key == record_key(key.split("|", 1)[0], message):
            return None
        return key

    def _index_skips(self) -> None:
        self.skips, self.copies = {}, {}
        for key, entry in self.entries.items():
            if entry.get("skip"):
                _, topic, partition, offset = key.rsplit("|", 3)
                self.skips[(topic, int(partition), int(offset))] = key
                ident = entry.get("id")
                if isinstance(ident, str) and ident.count(":") == 2:
                    self.copies.setdefault((topic, ident.split(":")[1]), {})[ident] = key

    def exhausted(self, count: int) -> bool:
        return count >= self.max_failures

    def dead_lettered(self, key: str, now: float | None = None) -> None:
        """The record is on the dead-letter topic: skip it on sight for DEAD_LETTERED_KEEP_S
        (a replay before the worker commits past it), without a second letter."""
        with self._changing():
            entry = self.entries.pop(key, None) or {}
            self.entries[key] = {"error": entry.get("error", HANG),
                                 "count": entry.get("count", 0), "skip": True,
                                 "dead_lettered_at": time.time() if now is None else now}
            if "id" in entry:  # its copies still go on sight
                self.entries[key]["id"] = entry["id"]
            self._prune(now)
            self._index_skips()

    def already_dead_lettered(self, key: str) -> bool:
        return "dead_lettered_at" in self.entries.get(key, {})

    def _prune(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        cutoff, unreached = now - DEAD_LETTERED_KEEP_S, now - UNREACHED_KEEP_S
        for key in [k for k, v in self.entries.items()
                    if float(v.get("dead_lettered_at", cutoff + 1)) < cutoff
                    or float(v.get("marked_at", unreached + 1)) < unreached]:
            del self.entries[key]

    def forget(self, stage: str, message: Any) -> None:
        """The record is dealt with (dead-lettered): its entry goes."""
        self.forget_key(record_key(stage, message))

    def forget_key(self, key: str) -> None:
        if key not in self.entries:
            return
        with self._changing():
            if self.entries.pop(key, None) is not None:
                self._index_skips()

    def _save(self) -> None:
        if self.path is None:
            return
        # durable: the process exits right after a failure is counted, make it stick
        status_files.replace_file(self.path, json.dumps(self.entries), durable=True)
        try:
            self._mtime = self.path.stat().st_mtime_ns
        except OSError:
            self._mtime = None


journal = FailureJournal()  # one worker per process; export_counts opens its file
