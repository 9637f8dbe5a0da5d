"""Read a topic with a plain consumer (no group, nothing committed): all of it, or its tail.

Used by the auditors (document and query proofs: everything), and by the redaction agent
to rebuild its chain ends from the newest of its own audit records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from shared.contract.topics import TopicSpec
from shared.kafka.connect import started
from shared.settings import KafkaSettings


async def read_topic(kafka: KafkaSettings, spec: TopicSpec) -> list[Any]:
    """Every record of `spec` up to its end when asked, per partition in offset order."""
    records, _ = await _read(kafka, spec, None)
    return records


async def read_back(kafka: KafkaSettings, spec: TopicSpec,
                    enough: Callable[[list[Any]], bool], tail: int = 64) -> list[Any]:
    """The shortest tail of `spec` (the last `tail` records of each partition, growing 8x
    a round) for which `enough(records)` holds, else the whole topic: a restart stays fast
    however long the topic's history is. A worker reads it after each rebalance, which a
    broker's restart causes: it waits up to the settings' outage_s for the broker."""
    while True:
        records, whole = await _read(kafka, spec, tail, kafka.outage_s)
        if whole or enough(records):
            return records
        tail *= 8


async def _read(kafka: KafkaSettings, spec: TopicSpec, tail: int | None,
                wait_s: float | None = None) -> tuple[list[Any], bool]:
    """The records from each partition's start (or `tail` before its end) up to the end
    offsets read first, per partition in offset order; and whether that was every
    partition's start. Records produced meanwhile are not waited for: a topic written
    without pause (a live mesh's) still has an end to read to. `wait_s`: how long to wait
    for a broker that refuses connections (None: fail at once)."""
    def make() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False, **kafka.client_options())
    if wait_s is None:
        consumer = make()
        await consumer.start()
    else:
        consumer = await started(make, AIOKafkaConsumer.stop, kafka.bootstrap, wait_s,
                                 f"reading {spec.name}")
    try:
        parts = [TopicPartition(spec.name, p) for p in range(spec.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        whole = True
        if tail is not None:
            starts = await consumer.beginning_offsets(parts)
            for tp in parts:
                if ends[tp] - tail > starts[tp]:
                    consumer.seek(tp, ends[tp] - tail)
                    whole = False
        out: list[Any] = []
        behind = [tp for tp in parts if await consumer.position(tp) < ends[tp]]
        while behind:
            got = await consumer.getmany(*behind, timeout_ms=500)
            for tp, records in got.items():
                out += [r for r in records if r.offset < ends[tp]]
            behind = [tp for tp in behind if await consumer.position(tp) < ends[tp]]
        return sorted(out, key=lambda r: (r.partition, r.offset)), whole
    finally:
        await consumer.stop()
