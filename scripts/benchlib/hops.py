"""When each document reached each pipeline topic, read from the records' Kafka timestamps:
the per-hop delays the ingest and latency benchmarks print."""

from __future__ import annotations

from collections.abc import Collection

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

# The pipeline's topics in order; a document's record on each is keyed by its id.
STAGES = ("docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1",
          "chunks.v1", "chunks.embedded.v1")


async def first_stamps(bootstrap: str, keys: Collection[str],
                       topics: tuple[str, ...] = STAGES) -> dict[str, dict[str, int]]:
    """Per topic, each key's first record timestamp (ms), reading every topic from the start
    to the end offsets it had when the read began."""
    stamps: dict[str, dict[str, int]] = {t: {} for t in topics}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        meta = await admin.describe_topics(list(topics))
    finally:
        await admin.close()
    tps = [TopicPartition(m["topic"], p) for m in meta if not m["error_code"]
           for p in range(len(m["partitions"]))]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=10)
    await consumer.start()
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        behind = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
        while behind:
            for tp, records in (await consumer.getmany(*behind, timeout_ms=200)).items():
                for r in records:
                    key = r.key.decode() if r.key else ""
                    if r.offset < ends[tp] and key in keys:
                        stamps[tp.topic].setdefault(key, r.timestamp)
            behind = [tp for tp in behind if await consumer.position(tp) < ends[tp]]
    finally:
        await consumer.stop()
    return stamps


def hop_delays(stamps: dict[str, dict[str, int]], keys: Collection[str],
               topics: tuple[str, ...] = STAGES) -> dict[str, list[float]]:
    """Per consecutive pair of topics, the delay (ms) of every key seen on both."""
    return {f"{a} -> {b}": [float(stamps[b][k] - stamps[a][k]) for k in keys
                            if k in stamps[a] and k in stamps[b]]
            for a, b in zip(topics, topics[1:], strict=False)}
