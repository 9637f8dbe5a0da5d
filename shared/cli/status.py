"""`streamrag status`: services up (group members), lag per topic, and per-stage record counts."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import grpc
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.boundary import COUNTS_FILE
from shared.cli.settings import MeshSettings
from shared.settings import KafkaSettings
from shared.topics import CHUNKS_EMBEDDED, SERVICE_INPUTS, SERVICES


@dataclass(frozen=True)
class GroupStatus:
    service: str
    members: int | None
    lag: dict[str, int]
    state: str


def add_parser(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("status", help="services up and consumer lag per topic")


async def collect(kafka: KafkaSettings) -> list[GroupStatus]:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options())
    await admin.start()
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
        await admin.close()


# Inputs a service never commits: retrieval's position on chunks.embedded.v1 is each
# shard's snapshot offset (services/retrieval/positions.py), so a group lag means nothing.
UNCOMMITTED = {("retrieval", CHUNKS_EMBEDDED.name)}


async def _lag(kafka: KafkaSettings, service: str, group: str) -> dict[str, int]:
    """End offset minus committed offset, summed over each input topic's partitions.

    The embedded broker's end offsets can run short after batched produces (see NOTES),
    so there this is a lower bound.
    """
    tps = [TopicPartition(t.name, p) for t in SERVICE_INPUTS[service]
           if (service, t.name) not in UNCOMMITTED for p in range(t.partitions)]
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                              enable_auto_commit=False, **kafka.client_options())
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


def stage_counts(data_dir: Path) -> dict[str, dict[str, float]]:
    """What each worker last wrote of its boundary counters (shared.boundary)."""
    out: dict[str, dict[str, float]] = {}
    for path in sorted(data_dir.glob(f"*/{COUNTS_FILE}")):
        try:
            out.update(json.loads(path.read_text()))
        except (OSError, ValueError):  # a worker writing it right now: skip this once
            continue
    return out


def render_counts(counts: dict[str, dict[str, float]]) -> str:
    lines = [f"{'stage':<17} {'processed':>9} {'dead':>6} {'internal':>8}  dead letters by reason"]
    for stage, c in sorted(counts.items()):
        dead = {k.split(".", 1)[1]: int(v) for k, v in c.items()
                if k.startswith("dead_lettered.")}
        internal = sum(int(v) for k, v in c.items() if k.startswith("internal_error."))
        reasons = ", ".join(f"{r}={n}" for r, n in sorted(dead.items())) or "-"
        lines.append(f"{stage:<17} {int(c.get('processed', 0)):>9} {sum(dead.values()):>6} "
                     f"{internal:>8}  {reasons}")
    return "\n".join(lines)


def inference_health(target: str) -> str:
    """Inference answers over gRPC; its reply reader has no consumer group to count."""
    with grpc.insecure_channel(target) as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                             timeout=2)
        except grpc.RpcError as exc:
            return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)


def run(args: argparse.Namespace) -> int:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    kafka = KafkaSettings()
    try:
        rows = asyncio.run(collect(kafka))
    except KafkaConnectionError:
        print(f"broker not reachable at {kafka.bootstrap}: is the mesh up (scripts/up)?")
        return 1
    mesh = MeshSettings()
    target = mesh.inference_target
    health = inference_health(target)
    print(render(rows))
    counts = stage_counts(mesh.run_dir / "data")
    if counts:
        print("\n" + render_counts(counts))
    print(f"\ninference gRPC {target}: {health}")
    workers_up = all(r.members for r in rows if r.service != "inference")
    return 0 if workers_up and health == "SERVING" else 1
