"""Follows config.query.v1 from its start and hands every record to LiveConfig.

A group-less consumer, so every inference instance reads every version (one partition,
in the order written); the newest valid one is applied, without a restart. A broker that
cannot be reached is retried with backoff: the instance keeps serving the version it has.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from services.inference.config.live import LiveConfig
from shared.contract.topics import CONFIG_QUERY
from shared.settings import KafkaSettings

log = logging.getLogger(__name__)
BACKOFF_S = (0.5, 1.0, 2.0, 5.0)


async def follow(kafka: KafkaSettings, live: LiveConfig, client_id: str = "inference-config",
                 ) -> None:
    """Read config.query.v1 for good (cancel to stop), applying each record in order."""
    failures, position = 0, [0]
    while True:
        try:
            await _read(kafka, live, client_id, position)
        except KafkaError as exc:
            delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
            failures += 1
            log.warning("reading %s failed (%s); retrying in %.1fs", CONFIG_QUERY.name,
                        type(exc).__name__, delay)
            await asyncio.sleep(delay)


async def _read(kafka: KafkaSettings, live: LiveConfig, client_id: str,
                position: list[int]) -> None:
    """Read from position[0] (the next offset, kept across reconnects) on."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.bootstrap, client_id=client_id, group_id=None,
        enable_auto_commit=False, auto_offset_reset="earliest",  # compaction moves the start
        fetch_max_wait_ms=kafka.query_fetch_max_wait_ms,
        **kafka.client_options())
    await consumer.start()
    try:
        tp = TopicPartition(CONFIG_QUERY.name, 0)
        consumer.assign([tp])
        consumer.seek(tp, position[0])
        async for message in consumer:
            live.offer(message.value)
            position[0] = message.offset + 1
    finally:
        await consumer.stop()
