"""How far a stage has claimed its input handled: its consumer groups' committed offsets,
read from outside the group (nothing is joined or committed); and what retention has
taken from a topic.

A service's offsets live in its own group, or in the one-process worker's when the mesh
runs in one process; a mesh may have run both ways, so both are read and the furthest
commit counts: any group that committed past a record has claimed it handled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import GroupAuthorizationFailedError, KafkaError, TopicAuthorizationFailedError

from shared.contract.topics import ONEBOX_APP, SERVICES, TopicSpec
from shared.settings import KafkaSettings


@dataclass(frozen=True)
class Committed:
    """`group` committed `offset` on a partition: every record below it is claimed handled."""

    group: str
    offset: int


def refused(exc: KafkaError) -> bool:
    """Whether the broker refused this principal (ACLs) rather than failed."""
    # aiokafka reports a topic refused inside an offset fetch as a plain KafkaError.
    return isinstance(exc, TopicAuthorizationFailedError | GroupAuthorizationFailedError) or \
        "AuthorizationFailed" in str(exc)


async def visible(kafka: KafkaSettings) -> set[str]:
    """The topics this principal may see. A consumer assigned a topic it may not see waits
    for its metadata until the request timeout instead of failing: ask first."""
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                              enable_auto_commit=False, **kafka.client_options())
    await reader.start()
    try:
        return set(await reader.topics())
    finally:
        await reader.stop()


def groups_of(service: str) -> tuple[str, ...]:
    """The consumer groups that may hold `service`'s offsets."""
    return (SERVICES[service], ONEBOX_APP)


async def committed(kafka: KafkaSettings, groups: tuple[str, ...],
                    tps: list[TopicPartition]) -> dict[TopicPartition, Committed]:
    """Per partition, the furthest offset any of `groups` committed (absent: none did)."""
    out: dict[TopicPartition, Committed] = {}
    for group in groups:
        reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                                  enable_auto_commit=False, **kafka.client_options())
        await reader.start()
        try:
            for tp in tps:
                offset = await reader.committed(tp)
                if offset is not None and (tp not in out or offset > out[tp].offset):
                    out[tp] = Committed(group, offset)
        finally:
            await reader.stop()
    return out


async def first_written(kafka: KafkaSettings, spec: TopicSpec,
                        wait_s: float = 10.0) -> dict[int, int | None]:
    """Each partition of `spec` whose log no longer starts at offset 0 (retention or
    DeleteRecords removed its head), with the time (ms) of the first record it still
    holds; None when it holds none (or it could not be read within `wait_s`)."""
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                              enable_auto_commit=False, **kafka.client_options())
    await reader.start()
    try:
        parts = [TopicPartition(spec.name, p) for p in range(spec.partitions)]
        starts = await reader.beginning_offsets(parts)
        ends = await reader.end_offsets(parts)
        out: dict[int, int | None] = {tp.partition: None for tp in parts if starts[tp] > 0}
        held = [tp for tp in parts if 0 < starts[tp] < ends[tp]]
        reader.assign(held)
        for tp in held:
            reader.seek(tp, starts[tp])
        deadline = time.monotonic() + wait_s
        while (waiting := [tp for tp in held if out[tp.partition] is None]) \
                and time.monotonic() < deadline:
            for tp, records in (await reader.getmany(*waiting, timeout_ms=500)).items():
                if records:
                    out[tp.partition] = records[0].timestamp
        return out
    finally:
        await reader.stop()
