"""Files a worker writes under its data dir for `streamrag status` to read, atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVENT_TIME_FILE = "event-time.json"  # ingest: each source's watermark, lag and lateness
MODELS_FILE = "index-models.json"  # retrieval: each model's index per shard, caught up or not


def write_json(path: Path, value: Any) -> None:
    """Replace `path` with `value` as JSON in one step (a reader never sees half of it)."""
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, sort_keys=True))
    tmp.replace(path)


def read_all(data_dir: Path, name: str) -> list[Any]:
    """What every worker under `data_dir` last wrote to `name` (unreadable ones skipped)."""
    out = []
    for path in sorted(data_dir.glob(f"*/{name}")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):  # being replaced right now: skip it this once
            continue
    return out
