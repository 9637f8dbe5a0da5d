"""The newest drift report of each source, domain and model, for the Stats RPC (pure).

Retrieval judges the drift windows and sends every closed one to drift.windows.v1; an agent
keeps, per key, the newest window and the newest drift event as one JSON value of the
drift_latest table, and `states` reads them back, filtered like the stream counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from shared.contract.records import DriftReport


@dataclass(frozen=True)
class DriftState:
    latest: DriftReport
    last_event: DriftReport | None = None


def drift_key(report: DriftReport) -> str:
    """One key per (source, domain, model); JSON, so no separator can occur in a name."""
    return json.dumps([report.source, report.domain, report.model_id], ensure_ascii=False)


def merge(stored: str, report: DriftReport) -> str:
    """The table value with `report` taken in: the newest window, and the newest event
    when it is one. A window older than the stored one (a replay) changes nothing."""
    state = parse(stored)
    if state is not None and report.window_start < state.latest.window_start:
        return stored
    event = report if report.status == "drift" else (state.last_event if state else None)
    return json.dumps({"latest": report.model_dump(mode="json"),
                       "last_event": event.model_dump(mode="json") if event else None})


def parse(stored: str) -> DriftState | None:
    if not stored:
        return None
    data = json.loads(stored)
    event = data.get("last_event")
    return DriftState(DriftReport.model_validate(data["latest"]),
                      DriftReport.model_validate(event) if event else None)


def states(items: Iterable[tuple[str, str]], source: str = "",
           domain: str = "") -> list[DriftState]:
    """Every key's state, sorted by source, domain and model; an empty filter matches all."""
    out = [s for _, value in items if (s := parse(value)) is not None
           and (not source or s.latest.source == source)
           and (not domain or s.latest.domain == domain)]
    return sorted(out, key=lambda s: (s.latest.source, s.latest.domain, s.latest.model_id))
