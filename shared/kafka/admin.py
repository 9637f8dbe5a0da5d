"""Create the contract's topics explicitly, with their partition counts and configs.

Every topic is created with the configured replication factor and min.insync.replicas
(KafkaSettings). Topics that exist already are checked: their partition counts against the
settings of their group (a mismatch names the topic, both counts and the command that fixes
it; Kafka can add partitions but never remove them), and for the evidence topics
(what an audit proof needs) that the broker keeps them as long as the audit retention says
(cleanup.policy delete, retention.ms, no size limit). A mismatch stops bring-up naming the
fix; nothing is altered behind the operator's back (shortening a retention deletes evidence).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka import errors as kafka_errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.structs import OffsetAndMetadata

from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import (
    FOREVER,
    TopicSpec,
    all_topic_specs,
    check_copartitioned,
    with_audit_retention,
)
from shared.errors import InfrastructureError
from shared.kafka.connect import started
from shared.settings import KafkaSettings, PartitionSettings

EVIDENCE_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes")

log = logging.getLogger(__name__)


async def _connected_admin(kafka: KafkaSettings, wait_s: float) -> AIOKafkaAdminClient:
    return await started(
        lambda: AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options()),
        AIOKafkaAdminClient.close, kafka.bootstrap, wait_s, "admin")


def contract_specs(retention: AuditRetentionSettings | None = None,
                   layout: PartitionSettings | None = None) -> tuple[TopicSpec, ...]:
    """Every topic of the contract, the evidence topics kept for the audit retention, sized
    by `layout` (default: this process's partition settings)."""
    retention = retention or AuditRetentionSettings()
    specs = with_audit_retention(all_topic_specs(layout), retention.retention_ms,
                                 retention.text_retention_ms, retention.raw_retention_ms)
    check_copartitioned(specs)
    return specs


def _fix(group: str, have: int, want: int) -> str:
    """What an operator does about topics of `group` with `have` partitions, not `want`."""
    variable = f"STREAMRAG_KAFKA_PARTITIONS_{group.upper()}"
    if group == "single":
        return "one reader must see all of it: recreate it with one partition"
    if have > want:
        return (f"Kafka cannot remove partitions: set {variable}={have}, or move the data to "
                f"a new topic generation (.v2 topics created with {want})")
    if group == "documents":  # the per-document order and state are re-homed by the tool
        return (f"run `streamrag topics --grow {want}` (docs/design/growing-partitions.md), "
                f"or set {variable}={have}")
    if group == "telemetry":  # keyed counts only: a key's windows split until they close
        return (f"add them with kafka-topics.sh --alter --partitions {want} (a key's window "
                f"counts split between its old and new partition until the windows close), "
                f"or set {variable}={have}")
    return (f"set {variable}={have}: `streamrag topics --grow` grows the document topics "
            f"only, and the ledger's table of anchored batches is keyed on these partitions")


def partition_problems(specs: tuple[TopicSpec, ...], found: dict[str, int]) -> list[str]:
    """The existing topics whose partition count (`found`, by name) differs from their spec,
    one line per group and count: the setting, the topics, both counts and what fixes it.
    Only the document topics grow with a tool of ours (`streamrag topics --grow`, which
    keeps each document's order); no topic shrinks in Kafka."""
    wrong: dict[tuple[str, int, int], list[str]] = {}
    for spec in specs:
        have = found.get(spec.name, spec.partitions)
        if have != spec.partitions:
            wrong.setdefault((spec.group, have, spec.partitions), []).append(spec.name)
    problems = []
    for (group, have, want), names in wrong.items():
        setting = ("the contract says 1" if group == "single"
                   else f"STREAMRAG_KAFKA_PARTITIONS_{group.upper()}={want}")
        problems.append(f"{setting}, but {', '.join(names)} "
                        f"{'has' if len(names) == 1 else 'have'} {have} partitions: "
                        f"{_fix(group, have, want)}")
    return problems


def replication_problems(specs: tuple[TopicSpec, ...], found: dict[str, int],
                         kafka: KafkaSettings) -> list[str]:
    """Each existing topic with fewer replicas (`found`, by name) than the setting asks."""
    return [f"topic {s.name} has {found[s.name]} replicas, STREAMRAG_KAFKA_REPLICATION_FACTOR="
            f"{kafka.replication_factor}: add replicas with kafka-reassign-partitions.sh"
            for s in specs if found.get(s.name, kafka.replication_factor)
            < kafka.replication_factor]


def new_topic(spec: TopicSpec, kafka: KafkaSettings) -> NewTopic:
    """The creation request of a contract topic: its count, the replication settings."""
    configs = {**spec.broker_config(), "min.insync.replicas": str(kafka.min_insync_replicas)}
    return NewTopic(spec.name, spec.partitions, kafka.replication_factor, topic_configs=configs)


def retention_of(configs: dict[str, str]) -> int | None:
    """A topic's retention.ms as the broker describes it; None: forever (or not said)."""
    try:
        value = int(configs.get("retention.ms", str(FOREVER)))
    except ValueError:
        return None
    return None if value == FOREVER or value < 0 else value


def text_config_problems(spec: TopicSpec, found: dict[str, str]) -> list[str]:
    """What an existing topic carrying document text lacks to expire it within the text
    retention (none when that retention is forever)."""
    want = spec.expires_after()
    if spec.text_kept_ms is None or want is None:
        return []
    out = []
    policy = set(found.get("cleanup.policy", "").split(","))
    if "delete" not in policy:
        out.append(f"{spec.name} has cleanup.policy={found.get('cleanup.policy', '(not set)')}, "
                   f"the text retention needs {spec.broker_config()['cleanup.policy']}")
    held = retention_of(found)
    if held is None or held > want:
        out.append(f"{spec.name} has retention.ms={found.get('retention.ms', '(not set)')}, "
                   f"the text retention needs at most {want}")
    return out


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


async def described(admin: AIOKafkaAdminClient, names: list[str], tries: int = 20,
                    ) -> dict[str, dict[str, str]]:
    """`describe_topic_configs`, asked again (up to `tries` times, 0.5 s apart) while a topic
    comes back without entries: one created a moment ago, by another bring-up, can."""
    for _ in range(tries - 1):
        configs = await describe_topic_configs(admin, names)
        if all(configs.get(name) for name in names):
            return configs
        await asyncio.sleep(0.5)
    return await describe_topic_configs(admin, names)


async def create_topics(admin: AIOKafkaAdminClient, topics: list[NewTopic]) -> list[str]:
    """Create `topics` in one request; the names created. A topic that exists already (the
    broker's metadata can lag a creation a moment ago) is not an error and not created;
    any other refusal is, naming the topic and Kafka's error."""
    response = await admin.create_topics(topics)
    created, refused = [], []
    for name, code, *message in response.topic_errors:
        if code == 0:
            created.append(name)
        elif code != TopicAlreadyExistsError.errno:
            refused.append(f"{name}: {kafka_errors.for_code(code).__name__} "
                           f"{(message or [''])[0] or ''}".strip())
    if refused:
        msg = "the broker refused to create topics: " + "; ".join(refused)
        raise InfrastructureError(msg)
    return created


async def ensure_topics(
    kafka: KafkaSettings, specs: tuple[TopicSpec, ...] | None = None, wait_s: float = 60.0,
) -> list[str]:
    """Create missing topics; fail if an existing one has another partition count or fewer
    replicas than the settings say, or an existing evidence topic another retention than
    the audit retention's. Nothing existing is altered."""
    specs = specs or contract_specs()
    admin = await _connected_admin(kafka, wait_s)
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        created = (await create_topics(admin, [new_topic(s, kafka) for s in missing])
                   if missing else [])
        present = [s for s in specs if s.name not in created]
        if present:
            meta = await admin.describe_topics([s.name for s in present])
            counts = {m["topic"]: len(m["partitions"]) for m in meta}
            replicas = {m["topic"]: min(len(p["replicas"]) for p in m["partitions"])
                        for m in meta if m["partitions"]}
            wrong = (partition_problems(tuple(present), counts)
                     + replication_problems(tuple(present), replicas, kafka))
            if wrong:
                msg = ("bring-up stopped, existing topics differ from the settings: "
                       + "; ".join(wrong))
                raise InfrastructureError(msg)
            evidence = [s for s in present if s.evidence]
            texts = [s for s in present if s.text_kept_ms is not None and not s.evidence]
            names = [s.name for s in (*evidence, *texts)]
            configs = await described(admin, names) if names else {}
            problems = [p for s in evidence for p in evidence_config_problems(
                s, configs.get(s.name, {}))]
            if problems:
                msg = ("; ".join(problems) + ". Set STREAMRAG_AUDIT_RETENTION_MS to what the "
                       "broker keeps, or change the topics (kafka-configs.sh --alter "
                       "--entity-type topics --entity-name NAME --add-config retention.ms=...)")
                raise InfrastructureError(msg)
            problems = [p for s in texts for p in text_config_problems(
                s, configs.get(s.name, {}))]
            if problems:
                msg = ("; ".join(problems) + ". Copies of document text would outlive "
                       "STREAMRAG_AUDIT_TEXT_RETENTION_MS: change the topics (kafka-configs.sh "
                       "--alter --entity-type topics --entity-name NAME --add-config "
                       "retention.ms=...,cleanup.policy=[...]) or unset the setting")
                raise InfrastructureError(msg)
        return created
    finally:
        await admin.close()


async def commit_offsets(kafka: KafkaSettings, group: str,
                         offsets: dict[TopicPartition, int]) -> None:
    """Commit `offsets` for `group` from outside it (no member joins): the partition growth
    moves the readers of re-homed records past them."""
    committer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                                 enable_auto_commit=False, **kafka.client_options())
    await committer.start()
    try:
        committer.assign(list(offsets))
        await committer.commit({tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()})
    finally:
        await committer.stop()
