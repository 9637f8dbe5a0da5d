"""What the broker holds of the audit evidence before anything is read: whether the evidence
topics exist, and how long it keeps redacted text (docs.redacted.v1's retention.ms).

An auditor pointed at a broker that lacks a topic would otherwise wait on a partition that
never appears and end in the Kafka client's timeout; this says what is missing in one
sentence instead. The retention is read from the broker, not from a setting: it is what
the broker enforces, whatever any process was configured with.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError, KafkaError

from shared.contract.topics import AUDIT_BATCHES, DOCS_REDACTED, LEDGER_ANCHORS
from shared.kafka.admin import describe_topic_configs, retention_of
from shared.settings import KafkaSettings

NEEDED = (DOCS_REDACTED.name, AUDIT_BATCHES.name, LEDGER_ANCHORS.name)


class EvidenceError(Exception):
    """The broker cannot be asked, or lacks an evidence topic: the message is the sentence."""


@dataclass(frozen=True)
class Evidence:
    text_retention_ms: int | None  # None: docs.redacted.v1 is kept forever


def missing_sentence(bootstrap: str, missing: list[str]) -> str:
    return (f"the broker at {bootstrap} holds no {', '.join(missing)}: the audit evidence "
            "is not there to verify (wrong broker, or a mesh that never started on it; "
            "`streamrag topics` creates the topics)")


async def _ask(kafka: KafkaSettings) -> Evidence:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap,
                                request_timeout_ms=10_000, **kafka.client_options())
    try:
        await admin.start()
    except KafkaConnectionError as exc:
        await admin.close()
        msg = f"the broker at {kafka.bootstrap} is not reachable ({type(exc).__name__})"
        raise EvidenceError(msg) from exc
    try:
        present = set(await admin.list_topics())
        if missing := [name for name in NEEDED if name not in present]:
            raise EvidenceError(missing_sentence(kafka.bootstrap, missing))
        configs = await describe_topic_configs(admin, [DOCS_REDACTED.name])
    except KafkaError as exc:
        msg = f"the broker at {kafka.bootstrap} did not answer ({type(exc).__name__}: {exc})"
        raise EvidenceError(msg) from exc
    finally:
        await admin.close()
    return Evidence(retention_of(configs.get(DOCS_REDACTED.name, {})))


def read_evidence(kafka: KafkaSettings) -> Evidence:
    return asyncio.run(_ask(kafka))
