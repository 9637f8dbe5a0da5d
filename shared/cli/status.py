"""`streamrag status`: which services are up (group members) and their lag per topic."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from shared.settings import KafkaSettings
from shared.topics import SERVICE_INPUTS, SERVICES


@dataclass(frozen=True)
class GroupStatus:
    service: str
    members: int | None
    lag: dict[str, int]
    state: str


def add_parser(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("status", help="services up and consumer lag per topic")


async def collect(kafka: KafkaSettings) -> list[GroupStatus]:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap)
    await admin.start()
    await consumer.start()
    try:
        out = []
        for service, group in SERVICES.items():
            members, state = None, "unknown"
            try:
                desc = (await admin.describe_consumer_groups([group]))[0]
                groups = getattr(desc, "groups", None) or []
                if groups:
                    state, members = groups[0][2], len(groups[0][5])
            except Exception:  # noqa: BLE001 - some brokers lack DescribeGroups: show unknown
                pass
            out.append(GroupStatus(service, members, await _lag(kafka, service, group), state))
        return out
    finally:
        await consumer.stop()
        await admin.close()


async def _lag(kafka: KafkaSettings, service: str, group: str) -> dict[str, int]:
    """End offset minus committed offset, summed over each input topic's partitions.

    The embedded broker's end offsets can run short after batched produces (see NOTES),
    so there this is a lower bound.
    """
    tps = [TopicPartition(t.name, p) for t in SERVICE_INPUTS[service] for p in range(t.partitions)]
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                              enable_auto_commit=False)
    await reader.start()
    try:
        ends = await reader.end_offsets(tps)
        lag: dict[str, int] = {}
        for tp in tps:
            committed = await reader.committed(tp) or 0
            lag[tp.topic] = lag.get(tp.topic, 0) + max(0, ends[tp] - committed)
        return lag
    finally:
        await reader.stop()


def render(rows: list[GroupStatus]) -> str:
    lines = [f"{'service':<11} {'state':<12} {'members':>7}  lag by topic"]
    for r in rows:
        members = "?" if r.members is None else str(r.members)
        lag = ", ".join(f"{t}={n}" for t, n in sorted(r.lag.items())) or "-"
        lines.append(f"{r.service:<11} {r.state:<12} {members:>7}  {lag}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    rows = asyncio.run(collect(KafkaSettings()))
    print(render(rows))
    return 0 if all(r.members for r in rows) else 1
