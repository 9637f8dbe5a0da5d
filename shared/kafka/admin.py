"""Create the contract's topics explicitly, with their partition counts and configs.

Topics that exist already are checked: their partition counts, and for the evidence topics
(what an audit proof needs) that the broker keeps them as long as the audit retention says
(cleanup.policy delete, retention.ms, no size limit). A mismatch stops bring-up naming the
fix; nothing is altered behind the operator's back (shortening a retention deletes evidence).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaConnectionError, TopicAlreadyExistsError

from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import TopicSpec, all_topic_specs, with_audit_retention
from shared.errors import InfrastructureError
from shared.settings import KafkaSettings

EVIDENCE_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes")

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


def contract_specs(retention: AuditRetentionSettings | None = None) -> tuple[TopicSpec, ...]:
    """Every topic of the contract, the evidence topics kept for the audit retention."""
    retention = retention or AuditRetentionSettings()
    return with_audit_retention(all_topic_specs(), retention.retention_ms)


def evidence_config_problems(spec: TopicSpec, found: dict[str, str]) -> list[str]:
    """What an existing evidence topic's configs (as the broker describes them) lack."""
    want = spec.broker_config()
    return [f"{spec.name} has {name}={found.get(name, '(not set)')}, the audit retention "
            f"needs {want[name]}" for name in EVIDENCE_CONFIGS if found.get(name) != want[name]]


async def describe_topic_configs(admin: AIOKafkaAdminClient, names: list[str],
                         ) -> dict[str, dict[str, str]]:
    responses: list[Any] = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    out: dict[str, dict[str, str]] = {}
    for response in responses:
        for resource in response.to_object()["resources"]:
            out[resource["resource_name"]] = {e["config_names"]: e["config_value"]
                                              for e in resource["config_entries"]}
    return out


async def ensure_topics(
    kafka: KafkaSettings, specs: tuple[TopicSpec, ...] | None = None, wait_s: float = 60.0,
) -> list[str]:
    """Create missing topics; fail if an existing one has another partition count, or an
    existing evidence topic another retention than the audit retention's."""
    specs = specs or contract_specs()
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
            evidence = [s for s in present if s.evidence]
            names = [s.name for s in evidence]
            configs = await describe_topic_configs(admin, names) if names else {}
            problems = [p for s in evidence for p in evidence_config_problems(
                s, configs.get(s.name, {}))]
            if problems:
                msg = ("; ".join(problems) + ". Set STREAMRAG_AUDIT_RETENTION_MS to what the "
                       "broker keeps, or change the topics (kafka-configs.sh --alter "
                       "--entity-type topics --entity-name NAME --add-config retention.ms=...)")
                raise InfrastructureError(msg)
        return created
    finally:
        await admin.close()
