"""Retrieval's drift agents under Faust's test context: samples in, closed windows out on
drift.windows.v1 and /metrics, the references saved; a bad sample is dead-lettered."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from unittest.mock import AsyncMock, patch

import numpy as np
from prometheus_client import REGISTRY

from services.retrieval.drift.detector import DriftConfig, Monitor
from shared.contract.codec import encode
from shared.contract.records import DriftReport, DriftSample, encode_vector
from tests.support import built
from tests.unit.retrieval.drift.synthetic import docs, topic
from tests.unit.retrieval.helpers import chunk_set

SOURCE = "agent-test"


def samples(rng: np.random.Generator, centre: np.ndarray, window: int, n: int) -> list[bytes]:
    return [encode(DriftSample(
        source=SOURCE, domain="it", model_id="m", doc_id=f"{window}/{i}", version=1,
        ingest_time=window * 60.0 + i, chunks=1, vector=encode_vector(v),
        terms={"disk" if window == 7 else "paper": 1})) for i, v in enumerate(
            docs(rng, centre, n))]


def test_closed_windows_go_to_their_topic_and_metrics_and_a_bad_sample_to_the_dlq(
        tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    old, new = topic(rng), topic(rng)
    values = [v for w in range(7) for v in samples(rng, old, w, 25)]
    values += samples(rng, new, 7, 25) + [b'{"source": "x"}']
    sent, dead = AsyncMock(), AsyncMock()
    snapshot = tmp_path / "drift.json"
    stage = built.stage("retrieval")
    drift = stage.drift

    async def drive() -> None:
        stage.app.finalize()
        stage.app.flow_control.resume()
        with patch.object(drift, "monitor", Monitor(DriftConfig(grace_s=0))), \
                patch.object(type(drift.settings), "drift_snapshot", snapshot), \
                patch.object(drift.windows_topic, "send", sent), \
                patch.object(stage.dlq, "send", dead):
            async with drift.judge.test_context() as agent:
                for value in values:
                    await agent.put(value=value, key=SOURCE.encode())
            await drift.close_idle(time.time() + 3600)  # window 7 is long past, lag and all

    asyncio.run(drive())
    reports = [DriftReport.model_validate_json(c.kwargs["value"]) for c in sent.await_args_list]
    assert [r.status for r in reports] == ["warming_up"] * 6 + ["stable", "drift"]
    assert reports[-1].terms == ("disk",) and {c.kwargs["key"] for c in
                                              sent.await_args_list} == {SOURCE.encode()}
    labels = {"source": SOURCE, "domain": "it", "model": "m"}
    assert REGISTRY.get_sample_value("streamrag_drift_events_total", labels) == 1
    assert REGISTRY.get_sample_value("streamrag_drift_z", labels) == reports[-1].z
    assert REGISTRY.get_sample_value("streamrag_drift_windows_total",
                                     {**labels, "status": "warming_up"}) == 6
    assert json.loads(snapshot.read_text())["keys"][0]["key"] == [SOURCE, "it", "m"]
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"]) == ("retrieval.drift", "invalid_field")


def test_only_recent_upserts_are_sampled() -> None:
    sent = AsyncMock()
    fresh = chunk_set("fresh", 1, [1]).model_copy(update={"ingest_time": time.time()})
    stale = chunk_set("stale", 1, [1]).model_copy(update={"ingest_time": time.time() - 7200})

    drift = built.stage("retrieval").drift

    async def drive() -> None:
        with patch.object(drift.samples_topic, "send", sent):
            await drift.sample(fresh)
            await drift.sample(stale)

    asyncio.run(drive())
    (call,) = sent.await_args_list
    assert DriftSample.model_validate_json(call.kwargs["value"]).doc_id == "fresh"
