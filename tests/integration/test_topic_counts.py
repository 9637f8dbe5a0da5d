"""Partition counts as a setting on the real embedded broker: topics created with 4
partitions per group and min.insync.replicas from the settings; a bring-up configured for 6
stops naming each topic, both counts and `streamrag topics --grow 6`, and alters nothing;
and the mesh's plain producers on Apache Kafka: acks=all and idempotent (a producer id,
sequence numbers on what it writes).

Only the admin client and the session broker: the contract's topics are renamed per run, so
the mesh sharing that broker never sees them."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from shared.contract.topics import (
    CHUNKS_EMBEDDED,
    DOCS_RAW,
    SEARCH_REQUESTS,
    TopicSpec,
    all_topic_specs,
)
from shared.errors import InfrastructureError
from shared.kafka.admin import describe_topic_configs, ensure_topics
from shared.settings import KafkaSettings, PartitionSettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
NAMES = (DOCS_RAW.name, CHUNKS_EMBEDDED.name, SEARCH_REQUESTS.name)


def specs(run: str, documents: int) -> tuple[TopicSpec, ...]:
    layout = PartitionSettings(partitions_documents=documents)
    return tuple(replace(s, name=f"test.{run}.{s.name}") for s in all_topic_specs(layout)
                 if s.name in NAMES)


def described(kafka: KafkaSettings, names: list[str]) -> tuple[dict[str, int], dict[str, str]]:
    async def go() -> tuple[dict[str, int], dict[str, str]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
        await admin.start()
        try:
            meta = await admin.describe_topics(names)
            configs = await describe_topic_configs(admin, names)
        finally:
            await admin.close()
        return ({m["topic"]: len(m["partitions"]) for m in meta},
                {n: c.get("min.insync.replicas", "(not set)") for n, c in configs.items()})
    return asyncio.run(go())


def test_a_bring_up_for_six_partitions_stops_on_topics_made_with_four(broker: str) -> None:
    kafka = KafkaSettings(bootstrap=broker)
    run = uuid.uuid4().hex[:8]
    four = specs(run, 4)
    names = sorted(s.name for s in four)
    assert sorted(asyncio.run(ensure_topics(kafka, four, wait_s=10))) == names
    counts, insync = described(kafka, names)
    assert counts == dict.fromkeys(names, 4)
    assert insync == dict.fromkeys(names, "1")  # the setting's default, passed explicitly

    with pytest.raises(InfrastructureError) as stopped:
        asyncio.run(ensure_topics(kafka, specs(run, 6), wait_s=10))
    assert str(stopped.value) == (
        f"bring-up stopped, existing topics differ from the settings: "
        f"STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS=6, but {', '.join(s.name for s in four)} have "
        f"4 partitions: run `streamrag topics --grow 6` (docs/design/growing-partitions.md), "
        f"or set STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS=4")
    assert described(kafka, names)[0] == dict.fromkeys(names, 4)  # never repartitioned
    assert asyncio.run(ensure_topics(kafka, four, wait_s=10)) == []  # four again: accepted


def test_the_mesh_producers_are_idempotent_on_kafka(broker: str) -> None:
    # STREAMRAG_KAFKA_PRODUCER_IDEMPOTENCE is on by default: Kafka answers InitProducerId, so
    # every record carries the producer's id and a sequence number, and a send retried after
    # a lost answer is written once.
    kafka = KafkaSettings(bootstrap=broker)
    topic = f"test.{uuid.uuid4().hex[:8]}.acks"
    asyncio.run(ensure_topics(kafka, (TopicSpec(topic, "k", "v", "single"),), wait_s=10))

    async def send(options: dict[str, object]) -> tuple[list[int], int, int]:
        """Three records' offsets, the producer's id and its next sequence number."""
        producer = AIOKafkaProducer(bootstrap_servers=broker, **options)
        try:
            await producer.start()
            offsets = [int((await producer.send_and_wait(topic, b"v", key=b"k")).offset)
                       for _ in range(3)]
            txn = producer._txn_manager  # noqa: SLF001 - where aiokafka keeps the id
            assert txn is not None, "no idempotence: the producer asked for no id"
            return offsets, txn.producer_id, txn.sequence_number(TopicPartition(topic, 0))
        finally:
            await producer.stop()
    assert kafka.producer_options() == {"acks": "all", "enable_idempotence": True}
    offsets, pid, sequence = asyncio.run(send(kafka.producer_options()))
    assert offsets == [0, 1, 2]
    assert pid >= 0 and sequence == 3
    assert asyncio.run(send(kafka.producer_options()))[1] not in (pid, -1)  # an id each
