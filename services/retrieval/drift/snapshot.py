"""The detectors' references on disk, so a restarted worker judges at once (pure I/O).

Written whenever windows close: each key's reference windows (count, vector sum, kept words),
its statistic history and the end of its last closed window. The open window is not kept: its
samples were acknowledged as they came, so after a crash that window is judged on what
arrives after the restart (or reported too_few_docs). A key whose source moved to another
worker starts there without history and warms up (no alarm meanwhile).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from services.retrieval.drift.detector import Detector, DriftConfig, Monitor
from services.retrieval.drift.window import Past, Reference
from shared.contract.records import decode_vector, encode_vector
from shared.worker.status_files import replace_file

VERSION = 1


def dump(monitor: Monitor) -> dict[str, Any]:
    return {"version": VERSION, "keys": [
        {"key": list(d.key), "horizon": d.horizon, "scores": d.scores,
         "past": [{"start": p.start, "count": p.count, "total": encode_vector(p.total),
                   "terms": p.terms} for p in d.reference.past]}
        for d in monitor.detectors.values()]}


def load(data: dict[str, Any], config: DriftConfig) -> Monitor:
    monitor = Monitor(config)
    if data.get("version") != VERSION:
        return monitor
    for item in data["keys"][-config.max_keys:]:
        key = (str(item["key"][0]), str(item["key"][1]), str(item["key"][2]))
        past = [Past(p["start"], int(p["count"]), decode_vector(p["total"]).astype(np.float64),
                     {str(t): int(n) for t, n in p["terms"].items()}) for p in item["past"]]
        monitor.detectors[key] = Detector(key, config, Reference(config.history, past),
                                          [float(s) for s in item["scores"]],
                                          horizon=float(item["horizon"]))
    return monitor


def save(monitor: Monitor, path: Path) -> None:
    """Write atomically: a crash mid-write leaves the previous snapshot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, json.dumps(dump(monitor)))


def restore(path: Path, config: DriftConfig) -> Monitor:
    """The saved monitor; an empty one when there is none or it cannot be read."""
    try:
        return load(json.loads(path.read_text()), config)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return Monitor(config)
