"""Read a whole topic with a plain consumer (no group, nothing committed), for the prover.

The embedded broker under-reports end offsets after batched produces, so reading goes on
until the reported end is passed and nothing new arrived for idle_s (as the document
auditor's reader does, services/redaction/reader.py; services do not import each other).
"""

from __future__ import annotations

import time
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from shared.contract.topics import TopicSpec
from shared.settings import KafkaSettings


async def read_topic(kafka: KafkaSettings, spec: TopicSpec, idle_s: float) -> list[Any]:
    """Every record of `spec`, per partition in offset order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=10,
                                **kafka.client_options())
    await consumer.start()
    try:
        parts = [TopicPartition(spec.name, p) for p in range(spec.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        out: list[Any] = []
        quiet_since = time.monotonic()
        while True:
            got = await consumer.getmany(timeout_ms=100)
            for records in got.values():
                out += records
            if got:
                quiet_since = time.monotonic()
            behind = [tp for tp in parts if await consumer.position(tp) < ends[tp]]
            if not behind and time.monotonic() - quiet_since >= idle_s:
                return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        await consumer.stop()
