"""Create the contract's topics explicitly, with their partition counts and configs."""

from __future__ import annotations

import asyncio
import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, TopicAlreadyExistsError

from shared.errors import InfrastructureError
from shared.settings import KafkaSettings
from shared.topics import TopicSpec, all_topic_specs

log = logging.getLogger(__name__)


async def _connected_admin(kafka: KafkaSettings, wait_s: float) -> AIOKafkaAdminClient:
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options())
        try:
            await admin.start()
            return admin
        except KafkaConnectionError as exc:
            await admin.close()
            if asyncio.get_running_loop().time() > deadline:
                msg = f"broker {kafka.bootstrap} not reachable after {wait_s:.0f}s"
                raise InfrastructureError(msg) from exc
            await asyncio.sleep(0.5)


async def ensure_topics(
    kafka: KafkaSettings, specs: tuple[TopicSpec, ...] | None = None, wait_s: float = 60.0,
) -> list[str]:
    """Create missing topics; fail if an existing one has another partition count."""
    specs = specs or all_topic_specs()
    admin = await _connected_admin(kafka, wait_s)
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        created: list[str] = []
        for spec in missing:
            new = NewTopic(spec.name, spec.partitions, kafka.replication_factor,
                           topic_configs=spec.broker_config())
            try:
                await admin.create_topics([new])
                created.append(spec.name)
            except TopicAlreadyExistsError:
                pass
        present = [s for s in specs if s.name in existing]
        if present:
            meta = await admin.describe_topics([s.name for s in present])
            counts = {m["topic"]: len(m["partitions"]) for m in meta}
            for spec in present:
                if counts.get(spec.name, spec.partitions) != spec.partitions:
                    msg = (f"topic {spec.name} has {counts[spec.name]} partitions, "
                           f"the contract says {spec.partitions}")
                    raise InfrastructureError(msg)
        return created
    finally:
        await admin.close()
