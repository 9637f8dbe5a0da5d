"""Stage metrics: what the boundary counts, the send sensor, consumer lag, the one server."""

from __future__ import annotations

import asyncio
import urllib.request
from types import SimpleNamespace
from unittest.mock import AsyncMock

from faust.types import TP
from prometheus_client import REGISTRY, CollectorRegistry

from services.cli.mesh import free_port
from shared.errors import InvalidInput
from shared.worker import metrics
from shared.worker.boundary import Boundary


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def event(topic: str, offset: int = 3) -> SimpleNamespace:
    return SimpleNamespace(message=SimpleNamespace(topic=topic, partition=0, offset=offset,
                                                   key=b"k", value=b"v"))


def test_the_boundary_counts_records_in_by_topic_and_the_sends_made_inside_it() -> None:
    stage, labels = "svc-a.sub", {"service": "svc-a", "stage": "svc-a.sub"}
    counter = metrics.SendCounter()
    boundary = Boundary(stage, SimpleNamespace(send=AsyncMock()))

    async def main() -> None:
        for offset in range(3):
            async with boundary.record(event("in.v1", offset)):
                counter.on_send_initiated(None, "out.v1", None, 1, 1)
                counter.on_send_initiated(None, "out.v1", None, 1, 1)
        counter.on_send_initiated(None, "out.v1", None, 1, 1)  # a timer's: no stage's output

    asyncio.run(main())
    assert sample("streamrag_stage_records_in_total", {**labels, "topic": "in.v1"}) == 3
    assert sample("streamrag_stage_records_out_total", {**labels, "topic": "out.v1"}) == 6
    assert sample("streamrag_stage_latency_seconds_count", labels) == 3
    assert metrics.current_stage.get() is None


def test_a_dead_letter_is_the_stages_output_on_the_dead_letter_topic() -> None:
    counter = metrics.SendCounter()

    async def send(**_: object) -> None:
        counter.on_send_initiated(None, "deadletter.v1", None, 1, 1)

    boundary = Boundary("svc-b", SimpleNamespace(send=send))

    async def main() -> None:
        async with boundary.record(event("in.v1")):
            raise InvalidInput("bad_json")

    asyncio.run(main())
    labels = {"service": "svc-b", "stage": "svc-b"}
    assert sample("streamrag_stage_records_out_total", {**labels, "topic": "deadletter.v1"}) == 1
    assert sample("streamrag_records_dead_lettered_total",
                  {"stage": "svc-b", "reason": "bad_json"}) == 1
    assert sample("streamrag_stage_records_in_total", {**labels, "topic": "in.v1"}) == 1


def test_a_retry_pass_is_not_counted_in_twice() -> None:
    boundary = Boundary("svc-c", SimpleNamespace(send=AsyncMock()))

    async def main() -> None:
        async with boundary.record(event("in.v1")):
            pass
        async with boundary.record(event("in.v1"), count=False):
            pass

    asyncio.run(main())
    labels = {"service": "svc-c", "stage": "svc-c"}
    assert sample("streamrag_stage_records_in_total", {**labels, "topic": "in.v1"}) == 1
    assert sample("streamrag_stage_latency_seconds_count", labels) == 2


def test_lag_is_end_minus_committed_for_partitions_with_both_known() -> None:
    a, b, c = TP("t", 0), TP("t", 1), TP("t", 2)
    assert metrics.lags({a: 10, b: 7, c: 5}, {a: 25, b: 6}) == {a: 15, b: 0}


def test_lag_gauges_come_from_the_faust_monitor() -> None:
    monitor = SimpleNamespace(tp_committed_offsets={TP("lag.v1", 1): 40},
                              tp_end_offsets={TP("lag.v1", 1): 52})
    metrics.update_lag("group-x", monitor)
    assert sample("streamrag_consumer_lag",
                  {"group": "group-x", "topic": "lag.v1", "partition": "1"}) == 12


def test_batch_sizes_are_observed_per_stage() -> None:
    for size in (1, 5, 5):
        metrics.batch("svc-d", size)
    labels = {"service": "svc-d", "stage": "svc-d"}
    assert sample("streamrag_stage_batch_size_sum", labels) == 11
    assert sample("streamrag_stage_batch_size_bucket", {**labels, "le": "4.0"}) == 1


def test_another_registry_shows_the_stage_metrics_through_default() -> None:
    metrics.received("svc-e", "in.v1")
    own = CollectorRegistry()
    own.register(metrics.Default())
    assert own.get_sample_value("streamrag_stage_records_in_total",
                                {"service": "svc-e", "stage": "svc-e", "topic": "in.v1"}) == 1


def test_a_process_serves_one_port_the_process_wide_one_first() -> None:
    server = metrics.Server()
    wide, own = free_port(), free_port()
    server.want("127.0.0.1", own)
    server.want("127.0.0.1", 0)  # a service without a port asks for nothing
    assert server.start(("127.0.0.1", wide)) == ("127.0.0.1", wide)
    server.want("127.0.0.1", free_port())
    assert server.start(("127.0.0.1", wide)) == ("127.0.0.1", wide)  # no second server
    metrics.received("svc-f", "in.v1")
    body = urllib.request.urlopen(f"http://127.0.0.1:{wide}/metrics", timeout=5).read().decode()
    assert ('streamrag_stage_records_in_total{service="svc-f",stage="svc-f",topic="in.v1"} 1.0'
            in body)


def test_no_port_no_server() -> None:
    server = metrics.Server()
    server.want("127.0.0.1", 0)
    assert server.start(("127.0.0.1", 0)) is None


def test_a_batch_sent_past_the_boundaries_counts_as_its_stages_output() -> None:
    counter = metrics.SendCounter()
    with metrics.sending_for("svc-g"):
        counter.on_send_initiated(None, "out.v1", None, 1, 1)
    counter.on_send_initiated(None, "out.v1", None, 1, 1)
    assert sample("streamrag_stage_records_out_total",
                  {"service": "svc-g", "stage": "svc-g", "topic": "out.v1"}) == 1
