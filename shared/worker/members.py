"""Each worker process's own folder under its stage's data dir, so workers of one consumer
group that share `STREAMRAG_DATA_DIR` never write each other's files.

Layout, under `<data dir>/<app id>/`:

    workers/<host>-<pid>/lock               held (flock) by the live worker, for its life
    workers/<host>-<pid>/stage-counters.json, stage-progress.json, records-in-hand.json, ...
    counters-retired.json                   the counters of workers that ended, summed
    record-failures.json                    shared by the group, changed under its own lock

A worker is live while it holds its `lock`: the kernel drops the lock when the process
ends, however it ends (kill -9 included), so whoever can take it knows the worker is gone.
A starting worker first reaps its stage's dead workers (`reap`: under `reap.lock`, one
reaper at a time): the records a dead one had in hand are counted against them
(shared/worker/poison.py `after_death`), its counters are added to `counters-retired.json`
so the stage's totals survive restarts (the file says since when it counts), and its
folder goes. `streamrag status` reads the live workers' progress and every worker's
counters (`files`), live or not yet reaped, the retired ones once.

A worker's folder is made under a hidden name, locked, then renamed into place, so no
reaper ever sees an unlocked folder of a worker that is starting. The folder name holds
the host name (a container's, when workers share a volume) and the pid; a new process
that finds a folder with its own name (a pid reused) knows it is a dead one's.

flock works between processes of one machine (containers sharing a local volume
included), not over a network file system: keep the data dir local.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.worker.status_files import COUNTS_FILE, IN_HAND_FILE, PROGRESS_FILE, replace_file

log = logging.getLogger(__name__)

WORKERS_DIR = "workers"
LOCK_FILE = "lock"
REAP_LOCK = "reap.lock"
RETIRED_FILE = "counters-retired.json"


def worker_name() -> str:
    """This process's folder name: host and pid (no path separators, no leading dot)."""
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())
    return f"{host or 'host'}-{os.getpid()}"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` (created if missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the lock


def is_live(folder: Path) -> bool:
    """Whether the worker of `folder` is still running: it holds its lock."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:
        return not folder.exists()  # reaped meanwhile: gone; never a half-made folder
    except OSError:
        return True  # cannot tell: do not treat a worker as dead
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@dataclass
class Member:
    """This process's folder under one stage dir, locked for the life of the process."""

    folder: Path
    fd: int

    @property
    def name(self) -> str:
        return self.folder.name

    def release(self) -> None:
        """Give up the folder's lock, as the process's end does (a test's worker 'dies')."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for stage_dir, member in list(_joined.items()):
            if member is self:
                del _joined[stage_dir]


_joined: dict[Path, Member] = {}  # this process's folder under each stage dir


def join(stage_dir: Path, on_dead: Callable[[Path], None] | None = None) -> Member:
    """This process's folder under `stage_dir` (made once per process and stage dir), after
    reaping the stage's dead workers (`on_dead(folder)` first for each, then the folder
    goes)."""
    stage_dir = stage_dir.resolve()
    if stage_dir in _joined:
        return _joined[stage_dir]
    workers = stage_dir / WORKERS_DIR
    workers.mkdir(parents=True, exist_ok=True)
    _adopt_single_folder_layout(stage_dir, on_dead)
    reap(stage_dir, on_dead)  # a folder with our own name is a dead one's: reaped here
    made = Path(tempfile.mkdtemp(dir=workers, prefix=f".{worker_name()}."))
    fd = os.open(made / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    folder = workers / worker_name()
    os.rename(made, folder)
    member = _joined[stage_dir] = Member(folder, fd)
    return member


def reap(stage_dir: Path, on_dead: Callable[[Path], None] | None = None) -> list[str]:
    """Retire every dead worker of the stage: `on_dead(folder)`, its counters added to
    the retired totals, its folder removed. The names reaped."""
    workers = stage_dir / WORKERS_DIR
    if not workers.is_dir():
        return []
    reaped = []
    with locked(stage_dir / REAP_LOCK):
        for folder in sorted(workers.iterdir()):
            if not folder.is_dir() or any(m.folder == folder for m in _joined.values()):
                continue
            if folder.name.startswith("."):  # made, never renamed: its maker died at once
                if not is_live(folder) and _age_s(folder) > 60:
                    shutil.rmtree(folder, ignore_errors=True)
                continue
            if is_live(folder):
                continue
            if on_dead is not None:
                try:
                    on_dead(folder)
                except Exception:  # noqa: BLE001 - a bad leftover must not stop the start
                    log.exception("cannot read what worker %s left", folder.name)
            _retire_counters(stage_dir, folder)
            shutil.rmtree(folder, ignore_errors=True)
            reaped.append(folder.name)
    if reaped:
        log.info("%s: retired %d worker(s) that ended: %s", stage_dir.name, len(reaped),
                 ", ".join(reaped))
    return reaped


def _adopt_single_folder_layout(stage_dir: Path, on_dead: Callable[[Path], None] | None) -> None:
    """Files a worker of an earlier release wrote straight into the stage dir: that worker
    has ended (this one replaces it), so they are retired like a dead worker's folder."""
    left = [stage_dir / n for n in (IN_HAND_FILE, COUNTS_FILE, PROGRESS_FILE)]
    if not any(p.exists() for p in left):
        return
    with locked(stage_dir / REAP_LOCK):
        if not any(p.exists() for p in left):
            return  # another worker adopted them meanwhile
        if on_dead is not None:
            on_dead(stage_dir)
        _retire_counters(stage_dir, stage_dir, name="(single-folder layout)")
        for path in left:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def own_file(stage_dir: Path, name: str) -> Path:
    """`name` in this process's folder under `stage_dir` (joined now if it was not)."""
    return join(stage_dir).folder / name


def _age_s(folder: Path) -> float:
    try:
        return time.time() - folder.stat().st_mtime
    except OSError:
        return 0.0


def _retire_counters(stage_dir: Path, folder: Path, name: str = "") -> None:
    """Add the dead worker's last counters to the stage's retired totals, naming it, so a
    reader that still sees its folder does not count it twice."""
    counters = _read(folder / COUNTS_FILE)
    started = _read(folder / PROGRESS_FILE).get("started_at")
    path = stage_dir / RETIRED_FILE
    retired = read_retired(stage_dir)
    for stage, values in counters.items():
        into = retired["counters"].setdefault(stage, {})
        for key, value in values.items():
            into[key] = into.get(key, 0) + value
    if isinstance(started, int | float):
        retired["since"] = min(retired.get("since") or started, started)
    retired["workers"] = (retired.get("workers", []) + [name or folder.name])[-1000:]
    replace_file(path, json.dumps(retired, sort_keys=True), durable=True)


def read_retired(stage_dir: Path) -> dict[str, Any]:
    """{"counters": {stage: {key: n}}, "since": first start counted, "workers": [names]}."""
    loaded = _read(stage_dir / RETIRED_FILE)
    if not isinstance(loaded.get("counters"), dict):
        loaded["counters"] = {}
    return loaded


def _read(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


@dataclass(frozen=True)
class Written:
    """One worker's copy of a status file."""

    stage_dir: Path
    worker: str
    live: bool
    value: Any


def files(data_dir: Path, name: str, *, live_only: bool) -> list[Written]:
    """What each worker under `data_dir` last wrote to `name`, the dead ones' too unless
    `live_only` (never a retired one's); unreadable copies skipped (being replaced)."""
    out = []
    for path in sorted(data_dir.glob(f"*/{WORKERS_DIR}/*/{name}")):
        folder = path.parent
        if folder.name.startswith("."):
            continue
        retired = read_retired(folder.parent.parent).get("workers", [])
        if folder.name in retired:
            continue  # counted in the retired totals, its folder about to go
        live = is_live(folder)
        if live_only and not live:
            continue
        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        out.append(Written(folder.parent.parent, folder.name, live, value))
    return out
