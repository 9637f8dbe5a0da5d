"""Make the Faust consumer resume each chunks.embedded.v1 partition where its shard left off."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.types import TP

from shared.settings import KafkaSettings

DigestOf = Callable[[bytes | None], str]


async def end_offsets(app: Any, topic: str) -> dict[int, int]:
    """{partition: end offset} of this worker's partitions of `topic`."""
    tps = [tp for tp in app.consumer.assignment() if tp.topic == topic]
    if not tps:
        return {}
    ends = await app.consumer.highwaters(*tps)
    return {tp.partition: int(ends.get(tp) or 0) for tp in tps}


async def resume_at(app: Any, topic: str, offsets: Mapping[int, int]) -> None:
    """Make the consumer read each partition of `topic` from the offset given for it.

    Faust 0.15 seeks every assigned partition to its committed offset right after
    on_rebalance_complete (recovery's perform_seek), which would undo a plain seek made
    here, so the position is also committed; aiokafka's seek_to_committed skips offset 0,
    so the plain seek is what moves a partition that rebuilds from the start.
    The group's committed offset is only a hint for us: the snapshot is the truth.
    Faust exposes no public commit of explicit offsets; this is the one place that reaches in.
    """
    tps = {TP(topic, p): o for p, o in offsets.items()}
    if tps:
        await app.consumer._commit(tps)
    for tp, offset in tps.items():
        await app.consumer.seek(tp, offset)


def digest_reader(kafka: KafkaSettings, topic: str, digest: DigestOf,
                  ) -> Callable[[int, int], Awaitable[str | None]]:
    """(partition, offset) -> digest of the record there, None when there is none."""
    async def digest_at(partition: int, offset: int) -> str | None:
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                    enable_auto_commit=False,
                                    fetch_max_wait_ms=kafka.query_fetch_max_wait_ms,
                                    **kafka.client_options())
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            batch = await consumer.getmany(tp, timeout_ms=3000, max_records=1)
            found = [r for r in batch.get(tp, []) if r.offset == offset]
            return digest(found[0].value) if found else None
        finally:
            await consumer.stop()
    return digest_at
