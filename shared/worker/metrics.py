"""Prometheus metrics every stage keeps, and the one /metrics server of a worker process.

Names (default registry; `stage` is a boundary's stage, `service` the part before its dot):

- `streamrag_records_processed_total{stage}`, `streamrag_records_dead_lettered_total{stage,
  reason}`, `streamrag_records_internal_error_total{stage,error}`: shared.worker.boundary
  and shared.contract.dlq (kept as they were: `streamrag status` reads them).
- `streamrag_stage_records_in_total{service,stage,topic}`: records a stage took, by topic.
- `streamrag_stage_records_out_total{service,stage,topic}`: records a stage sent while it
  held a record (dead letters and table changelogs included, by topic); a Faust sensor
  counts them, so timers' sends (stream statistics, latencies) are not a stage's output.
- `streamrag_stage_batch_size{service,stage}`: records per batch, where a stage batches.
- `streamrag_stage_latency_seconds{service,stage}`: time a record spent in its boundary.
- `streamrag_consumer_lag{group,topic,partition}`: end offset minus committed offset.
- `streamrag_stage_in_flight{stage}`, `streamrag_stage_last_progress_timestamp_seconds
  {stage}`, `streamrag_worker_event_loop_lag_seconds`: shared.worker.heartbeat.

A process serves them on one port (`serve`): in one-process mode every hosted stage is on
it, told apart by the labels. Inference keeps its own registry and port
(services/inference/telemetry/metrics.py) and shows this registry there too (`Default`).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from faust.sensors import Sensor
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_LATENCY_S = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
LAG_INTERVAL_S = 5.0

# The stage whose boundary the running task is inside (None: a timer, a gRPC call).
current_stage: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "streamrag_stage", default=None)

RECORDS_IN = Counter("streamrag_stage_records_in", "Records a stage took, by input topic",
                     ["service", "stage", "topic"])
RECORDS_OUT = Counter("streamrag_stage_records_out",
                      "Records a stage sent while handling a record, by topic (dead letters "
                      "and table changelogs included)", ["service", "stage", "topic"])
BATCH_SIZE = Histogram("streamrag_stage_batch_size", "Records per batch a stage handles",
                       ["service", "stage"], buckets=_BATCH)
LATENCY = Histogram("streamrag_stage_latency_seconds",
                    "Time a record spent inside its stage's boundary", ["service", "stage"],
                    buckets=_LATENCY_S)
CONSUMER_LAG = Gauge("streamrag_consumer_lag",
                     "Records behind per partition: the end offset the consumer last fetched "
                     "minus its committed offset",
                     ["group", "topic", "partition"])


def service_of(stage: str) -> str:
    """`ingest.dedup` -> `ingest`."""
    return stage.split(".", 1)[0]


def received(stage: str, topic: str) -> None:
    RECORDS_IN.labels(service_of(stage), stage, topic).inc()


def batch(stage: str, size: int) -> None:
    BATCH_SIZE.labels(service_of(stage), stage).observe(size)


def handled(stage: str, seconds: float) -> None:
    LATENCY.labels(service_of(stage), stage).observe(seconds)


@contextmanager
def sending_for(stage: str) -> Iterator[None]:
    """Count the sends inside the block as `stage`'s output (a batch sent past its
    records' boundaries, as redaction sends its micro-batch)."""
    token = current_stage.set(stage)
    try:
        yield
    finally:
        current_stage.reset(token)


class SendCounter(Sensor):
    """Counts each send under the stage the sending task is handling a record for."""

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int,
                          valsize: int) -> Any:
        stage = current_stage.get()
        if stage is not None:
            RECORDS_OUT.labels(service_of(stage), stage, topic).inc()
        return None


def lags(committed: Mapping[Any, int], end: Mapping[Any, int]) -> dict[Any, int]:
    """{tp: end - committed} for the partitions with both offsets known (never negative:
    a commit can run ahead of the last end offset fetched)."""
    return {tp: max(0, end[tp] - offset) for tp, offset in committed.items() if tp in end}


def update_lag(group: str, monitor: Any) -> None:
    """Set the lag gauges from Faust's monitor (committed offsets and fetched end offsets)."""
    for tp, lag in lags(monitor.tp_committed_offsets, monitor.tp_end_offsets).items():
        CONSUMER_LAG.labels(group, tp.topic, str(tp.partition)).set(lag)


_observed: set[str] = set()


def observe(app: Any) -> None:
    """Count the app's sends per stage and keep its consumer lag (once per app)."""
    if app.conf.id in _observed:
        return
    _observed.add(app.conf.id)
    app.sensors.add(SendCounter())

    @app.timer(LAG_INTERVAL_S, name=f"{app.conf.id}.consumer_lag")
    async def _lag() -> None:
        update_lag(app.conf.id, app.monitor)


class Default(Collector):
    """The default registry's metrics, for a registry of its own to show (inference's)."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


class Server:
    """The process's one /metrics server: the first port asked for; a later, different one
    is refused with a warning (one process, one port, every stage labelled on it)."""

    def __init__(self) -> None:
        self.wanted: list[tuple[str, int]] = []
        self.serving: tuple[str, int] | None = None

    def want(self, host: str, port: int) -> None:
        """A hosted service's port (0: none): served when the worker starts."""
        if port:
            self.wanted.append((host, port))

    def planned(self, first: tuple[str, int] | None = None) -> tuple[str, int] | None:
        """The address `start(first)` serves (or serves already); None: none."""
        if self.serving is not None:
            return self.serving
        asked = self._asked(first)
        return asked[0] if asked else None

    def _asked(self, first: tuple[str, int] | None) -> list[tuple[str, int]]:
        return ([first] if first and first[1] else []) + self.wanted

    def start(self, first: tuple[str, int] | None = None) -> tuple[str, int] | None:
        """Serve `first` (the process-wide port) or else the first port wanted; again: no-op."""
        asked = self._asked(first)
        if self.serving is None and asked:
            self.serving = asked[0]
            host, port = self.serving
            start_http_server(port, addr=host)
            log.info("stage metrics on http://%s:%d/metrics", host, port)
        for host, port in asked:
            if (host, port) != self.serving:
                log.warning("metrics port %s:%d not served: this process serves every stage "
                            "on %s", host, port, self.serving)
        self.wanted = []
        return self.serving


server = Server()
