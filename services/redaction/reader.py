"""Read a whole topic from its beginning with a plain consumer (no group, nothing committed).

Used by the auditor, and by the redaction agent to rebuild its chain ends from its own
audit records.
"""

from __future__ import annotations

import time
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from shared.topics import TopicSpec


async def read_topic(bootstrap: str, spec: TopicSpec, idle_s: float) -> list[Any]:
    """Every record of `spec`, per partition in offset order.

    The embedded broker under-reports end offsets after batched produces (it answers the
    base offset of the last record batch + 1), so reading goes on until the reported end
    is passed and nothing new arrived for idle_s.
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=10)
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
