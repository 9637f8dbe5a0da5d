"""The stream-statistics agent under Faust's test context: counts land in both windows and
read back per window; bad records are dead-lettered."""

from __future__ import annotations

import asyncio
import json
import time
from unittest.mock import AsyncMock

from services.inference.telemetry.streamstats import StatRow, WindowCounts
from shared.contract.records import StreamCounts
from tests.support import built
from tests.unit.inference.fakes import drive_agent

agents = built.stage("inference")  # a stage of its own


def counts(source: str, domain: str, **kinds: int) -> bytes:
    return StreamCounts(source=source, domain=domain, counts=kinds,
                        at=time.time()).model_dump_json().encode()


async def _drive(values: list[bytes]) -> tuple[WindowCounts, WindowCounts, WindowCounts,
                                               AsyncMock]:
    def read() -> tuple[WindowCounts, WindowCounts, WindowCounts]:
        return (agents.stream_stats("minute", 0.0), agents.stream_stats("hour", 0.0),
                agents.stream_stats("minute", 0.0, source="crm", domain="sales"))

    (minute, hour, crm_sales), dead = await drive_agent(agents, agents.count_stream_stats,
                                                        values, read)
    return minute, hour, crm_sales, dead


def test_counts_are_summed_per_source_domain_kind_in_the_minute_and_the_hour() -> None:
    values = [counts("crm", "sales", received=1, new=1),
              counts("crm", "sales", received=1, updated=1),
              counts("crm", "support", **{"received": 1, "dead_lettered.stale_version": 1}),
              counts("wiki", "eng", **{"pii.EMAIL_ADDRESS": 3}),
              b'{"source": "x", "domain": "y", "counts": "many", "at": 1}']
    minute, hour, crm_sales, dead = asyncio.run(_drive(values))
    expected = [StatRow("crm", "sales", "new", 1), StatRow("crm", "sales", "received", 2),
                StatRow("crm", "sales", "updated", 1),
                StatRow("crm", "support", "dead_lettered.stale_version", 1),
                StatRow("crm", "support", "received", 1),
                StatRow("wiki", "eng", "pii.EMAIL_ADDRESS", 3)]
    assert minute.rows == expected and hour.rows == expected
    assert crm_sales.rows == expected[:3]
    assert minute.end - minute.start == 60.0 and hour.end - hour.start == 3600.0
    now = time.time()
    assert minute.start <= now < minute.end + 1 and hour.start <= now < hour.end + 1
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["field"]) == ("inference", "counts")
