"""The feedback agent under Faust's test context: windowed counts, dead letters, the boost."""

from __future__ import annotations

import asyncio
import json
import time
from unittest.mock import AsyncMock

from services.inference.agents import WindowedFeedback
from services.inference.search.feedback import boost, boost_by_feedback
from shared.contract.records import Feedback
from tests.support import built
from tests.unit.inference.fakes import drive_agent, hit

agents = built.stage("inference")  # a stage of its own


async def _drive(values: list[bytes]) -> tuple[tuple[int, int], tuple[int, int], AsyncMock]:
    def read() -> tuple[tuple[int, int], tuple[int, int]]:
        view = WindowedFeedback(agents.clicks, agents.skips)
        return view.counts("c-1"), view.counts("c-2")

    (c1, c2), dead = await drive_agent(agents, agents.count_feedback, values, read)
    return c1, c2, dead


def feedback(chunk_id: str, kind: str) -> bytes:
    return Feedback(chunk_id=chunk_id, kind=kind, at=time.time()).model_dump_json().encode()


def test_clicks_and_skips_are_counted_in_the_current_hour_and_bad_ones_dead_lettered() -> None:
    values = [feedback("c-1", "click"), feedback("c-1", "click"), feedback("c-1", "skip"),
              b'{"chunk_id": "c-2", "kind": "like", "at": 1}', feedback("c-2", "skip")]
    c1, c2, dead = asyncio.run(_drive(values))
    assert (c1, c2) == ((2, 1), (0, 1))
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["field"]) == (
        "inference", "invalid_field", "kind")
    assert letter["payload_b64"] is None  # past ingest: a hash only


def test_boost_is_clamped_and_boosting_keeps_scores() -> None:
    assert boost(100, 0, 0.02, 0.2) == 0.2 and boost(0, 100, 0.02, 0.2) == -0.2
    hits = [hit("a", 0.80), hit("b", 0.75)]

    class View:
        def counts(self, chunk_id: str) -> tuple[int, int]:
            return (4, 0) if chunk_id == "b" else (0, 0)
    ranked = boost_by_feedback(hits, View(), 0.02, 0.2)
    assert [h.chunk_id for h in ranked] == ["b", "a"]  # 0.75 + 0.08 > 0.80
    assert [h.score for h in ranked] == [0.75, 0.80]
    assert [h.chunk_id for h in boost_by_feedback(hits, View(), 0.0, 0.2)] == ["a", "b"]
