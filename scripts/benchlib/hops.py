"""When each document reached each pipeline topic, read from the records' Kafka timestamps:
the per-hop delays the ingest and latency benchmarks print."""

from __future__ import annotations

import time
from collections.abc import Collection

from aiokafka import AIOKafkaConsumer

# The pipeline's topics in order; a document's record on each is keyed by its id.
STAGES = ("docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1",
          "chunks.v1", "chunks.embedded.v1")
QUIET_S = 2.0  # end offsets lie on the embedded broker: read until nothing came this long


async def first_stamps(bootstrap: str, keys: Collection[str],
                       topics: tuple[str, ...] = STAGES) -> dict[str, dict[str, int]]:
    """Per topic, each key's first record timestamp (ms), reading every topic from the start."""
    stamps: dict[str, dict[str, int]] = {t: {} for t in topics}
    consumer = AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", fetch_max_wait_ms=10)
    await consumer.start()
    try:
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < QUIET_S:
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                quiet_since = time.monotonic()
                for r in records:
                    key = r.key.decode() if r.key else ""
                    if key in keys:
                        stamps[tp.topic].setdefault(key, r.timestamp)
    finally:
        await consumer.stop()
    return stamps


def hop_delays(stamps: dict[str, dict[str, int]], keys: Collection[str],
               topics: tuple[str, ...] = STAGES) -> dict[str, list[float]]:
    """Per consecutive pair of topics, the delay (ms) of every key seen on both."""
    return {f"{a} -> {b}": [float(stamps[b][k] - stamps[a][k]) for k in keys
                            if k in stamps[a] and k in stamps[b]]
            for a, b in zip(topics, topics[1:], strict=False)}
