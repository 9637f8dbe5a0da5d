"""The drift agent under Faust's test context: the newest report per key reaches the Stats
view of every window; bad records are dead-lettered."""

from __future__ import annotations

import asyncio
import json

from services.inference.telemetry.streamstats import WindowCounts
from shared.contract.records import DriftReport
from tests.support import built
from tests.unit.inference.fakes import drive_agent

agents = built.stage("inference")  # a stage of its own


def report(start: float, status: str, source: str = "ops") -> bytes:
    return DriftReport(source=source, domain="it", model_id="m", window_start=start,
                       window_end=start + 60, docs=30, status=status, threshold=2.5,
                       z=5.0 if status == "drift" else 0.1, terms=("disk",),
                       at=start + 70).model_dump_json().encode()


def test_the_newest_window_and_event_per_key_are_in_the_stats_of_any_window() -> None:
    values = [report(0, "stable"), report(60, "drift"), report(120, "stable"),
              report(0, "warming_up", source="web"), b'{"source": "ops"}']

    def read() -> tuple[WindowCounts, WindowCounts]:
        return agents.stream_stats("minute", 0.0), agents.stream_stats("hour", 0.0, "ops")

    (minute, hour_ops), dead = asyncio.run(drive_agent(agents, agents.keep_drift, values, read))
    assert [(s.latest.source, s.latest.status) for s in minute.drift] == [
        ("ops", "stable"), ("web", "warming_up")]
    ops = minute.drift[0]
    assert ops.latest.window_start == 120
    assert ops.last_event is not None and ops.last_event.window_start == 60
    assert [s.latest.source for s in hour_ops.drift] == ["ops"]
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"]) == ("inference", "invalid_field")
