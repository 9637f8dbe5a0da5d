"""Query latencies for the tumbling one-minute table: the record, log buckets, percentiles.

Pure: the gRPC handlers append finished calls to a LatencyBuffer, a Faust timer sends
them to query.latency.v1, and an agent counts them per (method, bucket) in one-minute
tumbling windows; percentiles are read back from those bucket counts.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import Field

from shared.contract.records import Record

STEPS_PER_DOUBLING = 4  # bucket edges 2^(1/4) apart: a percentile is within ~19 %
N_BUCKETS = 72  # 1 ms .. 2^(71/4) ms ≈ 3.6e5 ms; the last bucket takes anything longer
BUFFER_MAX = 10_000  # finished calls waiting to be sent; the oldest go first when full


class QueryLatency(Record):
    """One finished call (query.latency.v1, keyed by method)."""

    method: str = Field(min_length=1, max_length=64)
    latency_ms: float = Field(ge=0)
    at: float  # seconds since the epoch
    # The query configuration version and variant that served the call ("", 0: none).
    variant: str = Field(default="", max_length=32)
    config_version: int = Field(default=0, ge=0)
    # The call failed (no shards answered, a full queue): the SLO guard's error rate. The
    # latency table counts finished calls only, as it did before failures were sent.
    error: bool = False


@dataclass(frozen=True)
class LatencyStats:
    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float


def upper_edge(bucket: int) -> float:
    """The largest latency (ms) that falls in the bucket."""
    return 2.0 ** (bucket / STEPS_PER_DOUBLING)


def bucket_of(latency_ms: float) -> int:
    """Bucket 0 holds <= 1 ms; bucket b holds (edge(b-1), edge(b)]."""
    if latency_ms <= 1.0:
        return 0
    return min(N_BUCKETS - 1, math.ceil(STEPS_PER_DOUBLING * math.log2(latency_ms) - 1e-9))


def table_key(method: str, bucket: int) -> str:
    return f"{method}/{bucket}"


def stats(counts: Callable[[int], int]) -> LatencyStats:
    """Count and p50/p95/p99 (the upper edge of the bucket holding each rank)."""
    per_bucket = [counts(b) for b in range(N_BUCKETS)]
    total = sum(per_bucket)
    return LatencyStats(total, *(_quantile(per_bucket, total, q) for q in (0.5, 0.95, 0.99)))


def _quantile(per_bucket: list[int], total: int, q: float) -> float:
    if total == 0:
        return 0.0
    rank = max(1, math.ceil(q * total))  # nearest-rank: the rank-th smallest latency
    seen = 0
    for bucket, n in enumerate(per_bucket):
        seen += n
        if seen >= rank:
            return upper_edge(bucket)
    raise AssertionError("rank beyond total")


@dataclass
class LatencyBuffer:
    """Finished calls between the handlers and the sender; bounded so a stalled broker
    costs old samples, not memory."""

    now: Callable[[], float]
    items: deque[QueryLatency] = field(default_factory=lambda: deque(maxlen=BUFFER_MAX))

    def record(self, method: str, seconds: float, variant: str = "",
               config_version: int = 0, error: bool = False) -> None:
        self.items.append(QueryLatency(method=method, latency_ms=seconds * 1000.0,
                                       at=self.now(), variant=variant,
                                       config_version=config_version, error=error))

    def drain(self) -> list[QueryLatency]:
        out = list(self.items)
        self.items.clear()
        return out
