"""A worker whose event loop stops turning exits, naming the record in hand; and what each
stage has in hand and when it last made progress, for `streamrag status` and /metrics.

Every stage handles its records on the event loop (heavy work goes to threads through
`asyncio.to_thread`: redaction's analysis, embedding's forward passes), so a loop that has
not turned for `STREAMRAG_WATCHDOG_LOOP_STALL_S` (60 s) is stuck: a record sent a pure
Python step into a loop that never ends, or a bug blocks it. The worker then consumes
nothing, commits nothing and answers nothing while its process lives, and supervision
(which restarts a process that exits) never steps in. `Heartbeat` watches from a thread:
the loop re-arms a timer every second; when it has not for the stall time, the thread logs
the stage and record in hand (topic, partition, offset: never content) and ends the
process, so the record replays in a new worker.

`InHand` is the list of records inside a boundary (shared/worker/boundary.py) right now, per
asyncio task, mirrored to `records-in-hand.json` in the worker's own folder
(shared/worker/members.py) on every change (one small pwrite, no fsync: it must outlive the
process, not the machine). The next worker of the stage to start finds the folder of the
one that died, reads what it died holding and counts it (shared/worker/poison.py
`after_death`): `Hang` for the one record the heartbeat named, `ProcessDied` for every
record in hand at an unannounced death (kill -9, an out-of-memory kill); a clean stop and
a fatal failure the boundary already counted leave nothing to count.

The same thread writes `stage-progress.json` (in the same folder) every 2 s (per stage:
when a record last left its boundary, how many are inside it and for how long the oldest
has been, the topics it reads) and keeps the gauges
`streamrag_stage_last_progress_timestamp_seconds{stage}`, `streamrag_stage_in_flight{stage}`
and `streamrag_worker_event_loop_lag_seconds` (default registry; shared/worker/metrics.py
serves it as /metrics from the worker).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import Gauge
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.worker import members, poison, status_files
from shared.worker.status_files import IN_HAND_FILE

log = logging.getLogger(__name__)
EXIT_HUNG = 70  # as shared.worker.boundary.EXIT_FATAL: the supervisor restarts the worker

LAST_PROGRESS = Gauge("streamrag_stage_last_progress_timestamp_seconds",
                      "When a record last left the stage's boundary (Unix time)", ["stage"])
IN_FLIGHT = Gauge("streamrag_stage_in_flight", "Records inside the stage's boundary now",
                  ["stage"])
LOOP_LAG = Gauge("streamrag_worker_event_loop_lag_seconds",
                 "Time since the worker's event loop last turned, as the heartbeat saw it")


class WatchdogSettings(BaseSettings):
    """The heartbeat of every worker (env prefix STREAMRAG_WATCHDOG_)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_WATCHDOG_", frozen=True)

    # A worker whose event loop has not turned for this long names the record in hand and
    # exits so it restarts (0: never). Generous: the loop only does bookkeeping between
    # awaits, but a 1 MiB document is chunked on it (seconds) and a retrieval snapshot is
    # written from it.
    loop_stall_s: float = Field(default=60.0, ge=0)
    # How often the heartbeat thread checks that the event loop turned.
    check_interval_s: float = Field(default=1.0, gt=0, le=60)
    # How often each stage's progress file (stage-progress.json) is written.
    progress_interval_s: float = Field(default=2.0, gt=0, le=600)
    # Port of the process's /metrics (every hosted stage's counters and gauges, labelled);
    # 0: the first hosted service's own `..._METRICS_PORT`, if any. One port per process.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # The address /metrics listens on.
    metrics_host: str = "127.0.0.1"


@dataclass
class Held:
    stage: str
    key: str  # shared.worker.poison.record_key: stage|topic|partition|offset
    task: Any  # the asyncio task handling it (the one a blocked loop is stuck in)
    since: float  # time.monotonic()
    # shared.worker.poison.identity, for a record that failed before (a suspect): its copies
    # at other offsets go with it once it is given up
    identity: str | None = None


@dataclass
class StageProgress:
    last_progress: float | None = None  # time.time() a record last left the boundary
    in_flight: int = 0
    topics: set[str] = field(default_factory=set)


class InHand:
    """The records inside a boundary now, mirrored to a file for the next process."""

    def __init__(self) -> None:
        self._held: dict[int, Held] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self.stages: dict[str, StageProgress] = {}
        self.path: Path | None = None
        self.member: members.Member | None = None  # this worker's folder, once open
        self._fd: int | None = None
        self._written = 0  # bytes of the longest mark so far: shorter ones are padded
        self._final = False  # the process is ending: the last mark stands

    def enter(self, stage: str, message: Any) -> int:
        token = next(self._tokens)
        try:
            task = asyncio.current_task()
        except RuntimeError:  # not on a loop (a test calling the boundary by hand)
            task = None
        key = poison.record_key(stage, message)
        suspect = poison.identity(message) if key in poison.journal.entries else None
        with self._lock:
            self._held[token] = Held(stage, key, task, time.monotonic(), suspect)
            progress = self.stages.setdefault(stage, StageProgress())
            progress.in_flight += 1
            progress.topics.add(message.topic)
            self._mark()
        IN_FLIGHT.labels(stage).inc()
        return token

    def leave(self, token: int) -> None:
        now = time.time()
        with self._lock:
            held = self._held.pop(token)
            progress = self.stages[held.stage]
            progress.in_flight -= 1
            progress.last_progress = now
            self._mark()
        IN_FLIGHT.labels(held.stage).dec()
        LAST_PROGRESS.labels(held.stage).set(now)

    def culprit(self, loop: asyncio.AbstractEventLoop) -> Held | None:
        """The record the loop is stuck in: the newest one held by the task running now.
        (Read from another thread while the loop is blocked, so nothing moves under it.)"""
        task = asyncio.current_task(loop)
        with self._lock:
            mine = [h for h in self._held.values() if task is not None and h.task is task]
        return mine[-1] if mine else None

    def snapshot(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        with self._lock:
            oldest: dict[str, float] = {}
            for h in self._held.values():
                oldest[h.stage] = max(oldest.get(h.stage, 0.0), now - h.since)
            return {stage: {"last_progress": p.last_progress, "in_flight": p.in_flight,
                            "oldest_in_hand_s": round(oldest.get(stage, 0.0), 3),
                            "topics": sorted(p.topics)} for stage, p in self.stages.items()}

    # The file: {"ended": bool, "records": {key: what to count if the process dies now},
    # "ids": {key: identity of a suspect among them}}.

    def open(self, stage_dir: Path) -> list[str]:
        """Join the stage's workers (shared/worker/members.py), counting what the dead ones
        died holding; from now on mirror ours in this worker's own folder. The keys now
        dead-lettered on sight (shared/worker/poison.py)."""
        if self._fd is not None:  # Faust sends on_worker_init twice: count one death once
            return []
        records: dict[str, str] = {}
        identities: dict[str, str] = {}
        died: list[str] = []

        def dead(folder: Path) -> None:
            left = _read_marks(folder / IN_HAND_FILE)
            if left is None or left.get("ended"):
                return  # a clean stop, or a worker that never took a record
            died.append(folder.name)
            records.update({k: v for k, v in left.get("records", {}).items()
                            if v in poison.DEATHS})
            ids = left.get("ids", {})
            identities.update({k: v for k, v in ids.items() if isinstance(v, str)}
                              if isinstance(ids, dict) else {})

        self.member = members.join(stage_dir, on_dead=dead)
        exhausted: list[str] = []
        if died:
            if records:
                log.warning("%d worker(s) here died with %d record(s) in hand: %s",
                            len(died), len(records),
                            ", ".join(f"{k} ({v})" for k, v in records.items()))
            exhausted = poison.journal.after_death(records, identities)
            for key in exhausted:
                log.error("%s was in hand at %d deaths of the worker running: it will be "
                          "dead-lettered %s", key, poison.MAX_FAILURES,
                          poison.REPEATED_FAILURE)
        self.path = self.member.folder / IN_HAND_FILE
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._written, self._final = 0, False
        with self._lock:
            self._mark()
        atexit.register(self.ended)
        return exhausted

    def ended(self) -> None:
        """A clean stop: nothing in hand to count."""
        with self._lock:
            if not self._final:
                self._write({"ended": True, "records": {}})

    def known_exit(self, records: dict[str, str]) -> None:
        """The process is about to end for a reason already accounted for: count only
        `records` ({key: Hang}) at the next start, not everything in hand."""
        with self._lock:
            self._write(self._marks(records))
            self._final = True

    def _mark(self) -> None:  # under the lock
        if self._fd is not None and not self._final:
            self._write(self._marks({h.key: poison.PROCESS_DIED
                                     for h in self._held.values()}))

    def _marks(self, records: dict[str, str]) -> dict[str, Any]:  # under the lock
        """The file's content for `records`, with the identity of each suspect among them."""
        marks: dict[str, Any] = {"ended": False, "records": records}
        ids = {h.key: h.identity for h in self._held.values()
               if h.identity is not None and h.key in records}
        if ids:
            marks["ids"] = ids
        return marks

    def _write(self, marks: dict[str, Any]) -> None:
        if self._fd is None:
            return
        data = json.dumps(marks).encode()
        # One pwrite at offset 0, padded over the longest earlier mark (JSON allows trailing
        # blanks): a kill at any moment leaves either the old mark or the new one.
        padded = data.ljust(self._written)
        self._written = max(self._written, len(data))
        try:
            os.pwrite(self._fd, padded, 0)
        except OSError as exc:  # a full disk costs the death count, not the worker
            log.warning("cannot write %s (%s)", self.path, type(exc).__name__)


def _read_marks(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_bytes() or b"null")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("%s unreadable (%s): no death counted", path, type(exc).__name__)
        return None
    return loaded if isinstance(loaded, dict) else None


in_hand = InHand()  # one worker per process; shared.worker.boundary enters and leaves it


def _exit_hung() -> None:
    sys.stderr.flush()
    os._exit(EXIT_HUNG)


class Heartbeat:
    """Watch `loop` from a thread; end the process once it has not turned for the stall
    time, and write the stages' progress for `streamrag status`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, settings: WatchdogSettings,
                 progress_path: Path | None = None, *, held: InHand = in_hand,
                 exit_process: Callable[[], None] = _exit_hung) -> None:
        self.loop, self.settings, self.held = loop, settings, held
        self.progress_path = progress_path
        self.exit_process = exit_process
        self.started_at = time.time()
        self.last_tick = time.monotonic()
        self.max_lag = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamrag-heartbeat",
                                        daemon=True)

    def start(self) -> None:
        self.loop.call_soon_threadsafe(self._tick)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _tick(self) -> None:
        self.last_tick = time.monotonic()
        if not self._stop.is_set():
            self.loop.call_later(self.settings.check_interval_s, self._tick)

    def _run(self) -> None:
        next_write = 0.0
        while not self._stop.wait(self.settings.check_interval_s):
            lag = max(0.0, time.monotonic() - self.last_tick - self.settings.check_interval_s)
            self.max_lag = max(self.max_lag, lag)
            LOOP_LAG.set(lag)
            if self.progress_path is not None and time.monotonic() >= next_write:
                next_write = time.monotonic() + self.settings.progress_interval_s
                self.write_progress(lag)
            if self.settings.loop_stall_s and lag > self.settings.loop_stall_s:
                self.blocked(lag)
                return

    def blocked(self, lag: float) -> None:
        """The loop is stuck: name the record in hand, leave it to be counted, exit."""
        culprit = self.held.culprit(self.loop)
        where = "no record in hand"
        if culprit is not None:
            _, topic, partition, offset = culprit.key.rsplit("|", 3)
            where = (f"{culprit.stage} on {topic}/{partition}@{offset} (in hand "
                     f"{time.monotonic() - culprit.since:.0f} s)")
        log.critical("the event loop has not turned for %.1f s: %s; exiting so the worker "
                     "restarts and the record replays", lag, where)
        self.held.known_exit({culprit.key: poison.HANG} if culprit else {})
        self.exit_process()

    def write_progress(self, lag: float) -> None:
        assert self.progress_path is not None
        body = {"pid": os.getpid(), "written_at": time.time(), "started_at": self.started_at,
                "loop_lag_s": round(lag, 3), "max_loop_lag_s": round(self.max_lag, 3),
                "stages": self.held.snapshot()}
        try:
            status_files.replace_file(self.progress_path, json.dumps(body, sort_keys=True))
        except OSError as exc:
            log.warning("cannot write %s (%s)", self.progress_path, type(exc).__name__)
