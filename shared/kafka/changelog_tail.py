"""Table recovery reads each changelog to its true end, not to a short ListOffsets answer.

Faust recovers a table by reading its changelog up to the "highwater" that ListOffsets
reported when the worker (re)joined. The embedded broker answers ListOffsets(latest) with
(base offset of the last record batch) + 1 (measured; docs/durability.md): after batched
produces, a whole tail of the changelog lies past that answer, and Faust would stop short
of it, forgetting the newest table writes of the worker that died. Fetch responses carry
the right high watermark, so `true_ends` reads a little from each reported end and takes
the larger of the two answers; `install` makes Faust's recovery use it. On Apache Kafka
the two agree and this costs one short fetch per changelog partition at recovery.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.tables import recovery as faust_recovery

from shared.kafka.seam import replace
from shared.settings import KafkaSettings

log = logging.getLogger(__name__)
PROBE_ROUNDS = 5  # fetches per probe: the first with data carries the high watermark
PROBE_WAIT_MS = 200

_kafka: KafkaSettings | None = None


async def true_ends(kafka: KafkaSettings, reported: Mapping[Any, int | None]) -> dict[Any, int]:
    """For each partition (faust TP or aiokafka TopicPartition), the offset after its last
    record: the reported end, or the Fetch high watermark when that is further."""
    tps = {TopicPartition(tp.topic, tp.partition): tp for tp in reported}
    if not tps:
        return {}
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=10,
                                **kafka.client_options())
    await consumer.start()
    try:
        consumer.assign(list(tps))
        for tp, orig in tps.items():
            consumer.seek(tp, max(0, (reported[orig] or 0) - 1))
        ends = {tp: reported[orig] or 0 for tp, orig in tps.items()}
        for _ in range(PROBE_ROUNDS):
            batch = await consumer.getmany(timeout_ms=PROBE_WAIT_MS)
            for tp, records in batch.items():
                ends[tp] = max(ends[tp], records[-1].offset + 1)
            _raise_to_highwater(consumer, ends)
            if not batch:
                break
        return {tps[tp]: end for tp, end in ends.items()}
    finally:
        await consumer.stop()


def _raise_to_highwater(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> None:
    for tp in ends:
        high = consumer.highwater(tp)
        if high is not None:
            ends[tp] = max(ends[tp], high)


def install(kafka: KafkaSettings) -> None:
    """Have Faust's table recovery (active and standby) read changelogs to their true end.

    Wraps faust-streaming 0.15.3's private `Recovery._build_highwaters`. Not a Faust bug:
    the short ListOffsets answer is the embedded broker's, and no upstream issue was found
    for it. Removable when the embedded broker answers ListOffsets(latest) with the high
    watermark (tests/integration/test_changelog_tail.py shows whether it does), or where
    only Apache Kafka is used.
    """
    global _kafka
    if _kafka is None:

        async def build(self: Any, consumer: Any, tps: set[Any], destination: Any,
                        title: str) -> None:
            await original(self, consumer, tps, destination, title)
            assert _kafka is not None
            reported = {tp: destination[tp] + 1 for tp in tps}  # Faust stores end - 1
            ends = await true_ends(_kafka, reported)
            for tp, end in ends.items():
                if end > reported[tp]:
                    log.warning("%s changelog %s/%s: broker reported end %d, records up to "
                                "%d; recovering to the true end", title, tp.topic,
                                tp.partition, reported[tp], end)
                    destination[tp] = end - 1

        original = replace(faust_recovery.Recovery, "_build_highwaters", build)
    _kafka = kafka
