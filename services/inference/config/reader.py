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


async def follow(kafka: KafkaSettings, live: LiveConfig,
                 caught_up: asyncio.Event | None = None,
                 client_id: str = "inference-config") -> None:
    """Read config.query.v1 for good (cancel to stop), applying each record in order;
    `caught_up` is set once every record there at the start has been offered."""
    failures, position = 0, [0]
    caught_up = caught_up or asyncio.Event()
    while True:
        try:
            await _read(kafka, live, client_id, position, caught_up)
        except KafkaError as exc:
            delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
            failures += 1
            log.warning("reading %s failed (%s); retrying in %.1fs", CONFIG_QUERY.name,
                        type(exc).__name__, delay)
            await asyncio.sleep(delay)


async def _read(kafka: KafkaSettings, live: LiveConfig, client_id: str,
                position: list[int], caught_up: asyncio.Event) -> None:
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
        end = (await consumer.end_offsets([tp]))[tp]
        if await consumer.position(tp) >= end:
            caught_up.set()
        async for message in consumer:
            live.offer(message.value)
            position[0] = message.offset + 1
            if position[0] >= end:
                caught_up.set()
    finally:
        await consumer.stop()
