"""One place that builds a faust.App with the mesh's settings and topics.

A service's `app.make` calls `make_app` for its own app; one-process mode (services/onebox)
calls it once, with `ContractTable`, and builds every service on that one app, so all
agents, tables and timers register on one worker with one consumer. Table changelogs keep
the contract's per-service names (`ContractTable`), so both modes read and write the same
topics. Nothing here runs at import: an app exists only once a `__main__`, the one-process
composition or a test has asked for one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faust

from shared.contract.topics import TABLES, TopicSpec
from shared.errors import ConfigError
from shared.kafka import patches, watchdog
from shared.settings import KafkaSettings
from shared.tracing import spans
from shared.worker.boundary import exit_now


def make_app(app_id: str, kafka: KafkaSettings, data_dir: Path,
             **overrides: Any) -> faust.App:
    """A new app: `app_id` is its consumer group."""
    # Every fix of Faust's and aiokafka's private methods, after checking their versions.
    patches.install(kafka, on_refused=exit_now)
    # Spans of this process's stages, if STREAMRAG_TRACING_EXPORTER says where to send them.
    spans.setup(app_id)
    # Created by shared.worker.runner when the worker starts: importing a service touches no disk.
    app_dir = (data_dir / app_id).resolve()
    conf: dict[str, Any] = dict(
        broker=kafka.url,
        broker_credentials=kafka.faust_credentials(),
        store="memory://",
        datadir=str(app_dir),
        topic_replication_factor=kafka.replication_factor,
        topic_disable_leader=True,
        # Under ACLs (SASL) a service holds no Create grant: the topics job made every topic
        # of the contract, changelogs included, and Faust must not try to.
        topic_allow_declare=not kafka.sasl,
        broker_session_timeout=kafka.session_timeout_s,
        broker_rebalance_timeout=kafka.rebalance_timeout_s,
        broker_heartbeat_interval=kafka.heartbeat_interval_s,
        producer_linger=kafka.producer_linger_ms / 1000.0,
        # A record counts as written once every in-sync replica holds it; with
        # min.insync.replicas (topic config, shared/kafka/admin.py) a write that fewer
        # replicas could take fails instead of being acknowledged (docs/deployment.md,
        # "Replicated Kafka"). Idempotence: shared/kafka/durability.py.
        producer_acks=-1,
        # One record limit for the whole mesh (shared/contract/sizes.py): the producer sends and the
        # consumer fetches whole records up to it (Faust's defaults, 1,000,000 and 1 MiB,
        # were below what a valid 1 MiB document derives).
        producer_max_request_size=kafka.max_record_bytes,
        consumer_max_fetch_size=kafka.max_record_bytes,
        producer_compression_type=(None if kafka.producer_compression == "none"
                                   else kafka.producer_compression),
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
        autodiscover=False,
    )
    conf.update(overrides)
    app = faust.App(app_id, **conf)
    # The checkpoint (shared/kafka/checkpoint.py) replaces Faust's commit, which published
    # attached messages and ended transactions on the way: neither may be asked for.
    guarantee = getattr(app.conf.processing_guarantee, "value", app.conf.processing_guarantee)
    if app.conf.stream_publish_on_commit or guarantee != "at_least_once":
        msg = (f"{app_id}: the checkpoint commits at-least-once, without attachments "
               "(stream_publish_on_commit) or transactions (exactly_once)")
        raise ConfigError(msg)
    # A crashed worker exits, though Faust's stop may wait forever for unacked records.
    watchdog.exit_after_crash(app)
    # So does one whose agent raised, before Faust restarts the agent and commits its batch.
    watchdog.exit_on_agent_error(app)
    return app


class ContractTable(faust.Table):
    """A table whose changelog is named by the topic contract (shared/contract/topics.py),
    not by the app that hosts it: in one process, ingest's table still writes
    `streamrag-ingest-doc_versions-changelog`.

    Overrides faust-streaming's private `Collection._changelog_topic_name` (listed in
    shared.kafka.patches.PATCHED); not a workaround of a Faust bug, so no upstream issue.
    Removable once every table passes its contract changelog as Faust's public
    `changelog_topic=` argument instead.
    """

    def _changelog_topic_name(self) -> str:
        for spec in TABLES:
            if spec.name == self.name:
                return spec.changelog
        return str(super()._changelog_topic_name())


def topic(app: faust.App, spec: TopicSpec, *, committed: bool = True) -> Any:
    """A raw-bytes Faust topic for a contract entry; records are parsed by shared.contract.codec.

    `committed=False`: the checkpoint (shared/kafka/checkpoint.py) never commits offsets
    of this topic for the app's group, for a consumer whose position is its own state
    (retrieval's shard snapshots); Faust then tracks none of its records either.
    """
    return app.topic(
        spec.name, partitions=spec.partitions, key_type=bytes, value_type=bytes,
        key_serializer="raw", value_serializer="raw", internal=False, acks=committed,
    )
