"""Files a worker writes under its data dir, each replaced atomically through a temporary
file of its own.

Several workers of one stage may share a data dir (a second `streamrag worker redaction`
beside the mesh's): a fixed temporary name (`stage-counters.tmp`) was then written by both,
and the one that renamed second found it gone (`FileNotFoundError` in a timer, which
crashed the worker). `replace_file` names each temporary file uniquely, in the
target's directory (so the rename stays on one file system), hidden (a leading dot) from
the globs that read the targets, and removes it if the write fails. Files that are one
worker's own live in its folder (shared/worker/members.py), so they are never shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

# Each in the worker's own folder (shared/worker/members.py).
COUNTS_FILE = "stage-counters.json"  # every stage's boundary counters (shared.worker.boundary)
PROGRESS_FILE = "stage-progress.json"  # what each stage has in hand (shared.worker.heartbeat)
IN_HAND_FILE = "records-in-hand.json"  # the records to count if the worker dies now
EVENT_TIME_FILE = "event-time.json"  # ingest: each source's watermark, lag and lateness
MODELS_FILE = "index-models.json"  # retrieval: each model's index per shard, caught up or not


def replace_file(path: Path, data: str | bytes, *, durable: bool = False) -> None:
    """Replace `path` with `data` in one step: a reader sees the old content or the new,
    never half, and writers of the same path at the same time never collide (the last
    rename wins). `durable`: fsync before the rename, for a file that must survive the
    process exiting right after (the rename itself is atomic either way)."""
    with replacing(path, durable=durable) as handle:
        handle.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def replacing(path: Path, *, durable: bool = False) -> Iterator[BinaryIO]:
    """`replace_file` for a writer that needs a file handle (numpy's savez): write to the
    handle; `path` is replaced once the block ends without an exception."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)  # as the files were before: readable by status
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: Path, value: Any) -> None:
    """Replace `path` with `value` as JSON in one step (a reader never sees half of it)."""
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, json.dumps(value, sort_keys=True))
