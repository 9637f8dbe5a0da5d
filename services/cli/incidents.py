"""The SLO guard's newest incidents, read from guard.incidents.v1 for `streamrag status`:
its actions, and its reports (a breach of the main variant or one every variant shares, a
variant with too few calls to judge and the traffic it needs)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from shared.contract.codec import decode
from shared.contract.records import GuardIncident
from shared.contract.topics import GUARD_INCIDENTS
from shared.errors import InvalidInput
from shared.settings import KafkaSettings

NEWEST = 10
READ_TIMEOUT_MS = 2000
READ_LIMIT_S = 10.0


async def newest(kafka: KafkaSettings, n: int = NEWEST) -> list[GuardIncident]:
    """The last `n` incident records (oldest first); unreadable ones are skipped, and a
    topic that cannot be read (a mesh from before the guard) shows none."""
    try:
        return await asyncio.wait_for(_read(kafka, n), READ_LIMIT_S)
    except (KafkaError, TimeoutError):
        return []


async def _read(kafka: KafkaSettings, n: int) -> list[GuardIncident]:
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                **kafka.client_options())
    await consumer.start()
    try:
        tp = TopicPartition(GUARD_INCIDENTS.name, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        begin = (await consumer.beginning_offsets([tp]))[tp]
        consumer.seek(tp, max(begin, end - n))
        out: list[GuardIncident] = []
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=READ_TIMEOUT_MS)
            if not batch:
                break
            for message in batch.get(tp, []):
                try:
                    out.append(decode(GuardIncident, message.value))
                except InvalidInput:
                    continue
        return out[-n:]
    finally:
        await consumer.stop()


def as_json(incidents: list[GuardIncident]) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in incidents]


def render(incidents: list[GuardIncident]) -> str:
    lines = ["SLO guard incidents (newest last)"]
    for i in incidents:
        when = datetime.fromtimestamp(i.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        wrote = f"wrote version {i.version}" if i.version is not None else "wrote nothing"
        kind = f" {i.kind}" if i.kind else ""
        lines.append(f"  {when}  {i.incident}  tier {i.tier}{kind}  {i.variant}: {wrote} "
                     f"(from {i.from_version})  {i.note}")
        for w in i.windows:
            broken = ", ".join([*w.breaches, *(f"{b} (shared)" for b in w.shared)]) or "-"
            lines.append(f"      window {w.start:.0f}: {broken}; calls {w.calls} (slow "
                         f"{w.slow}, in flight {w.overdue}, cancelled {w.cancelled}), p99 "
                         f"{w.p99_ms:.0f} ms, errors {w.errors}, probe {w.probe_hit_rate} vs "
                         f"{w.reference_probe_hit_rate}")
        for path, (old, new) in i.diff.items():
            lines.append(f"      {path}: {old} -> {new}")
    return "\n".join(lines if incidents else [lines[0], "  none"])
