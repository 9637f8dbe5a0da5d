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

    Only a seek: the app never commits offsets of `topic` (acks off, services/retrieval/
    app.py), so Faust's own seeks to committed offsets, after on_rebalance_complete
    (recovery's perform_seek) and whenever its fetcher finds the flow stopped, find none
    and leave this position alone. Committing the position as well, as this did before,
    raced with those seeks: one that read the group's offset before the commit landed (or
    after a commit refused in a rebalance, which Faust reports only as False) moved the
    partition to where the previous owner had stopped, past records a rebuilt shard lacks.
    """
    for p, offset in offsets.items():
        await app.consumer.seek(TP(topic, p), offset)


def digest_reader(kafka: KafkaSettings, topic: str, digest: DigestOf,
                  ) -> Callable[[int, int], Awaitable[str | None]]:
    """(partition, offset) -> digest of the record there, None when there is none."""
    async def digest_at(partition: int, offset: int) -> str | None:
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                    enable_auto_commit=False,
                                    fetch_max_wait_ms=kafka.query_fetch_max_wait_ms,
                                    max_partition_fetch_bytes=kafka.max_record_bytes,
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
