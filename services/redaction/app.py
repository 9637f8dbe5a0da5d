"""The redaction service's app and topics (the chain ends are rebuilt from audit.batches.v1):
`make` builds its own app (the distributed deployment), `declare` its topics on whichever
app it is built on (agents.build)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from services.redaction.settings import RedactionSettings
from shared.contract.topics import (
    AUDIT_BATCHES,
    DEADLETTER,
    DOCS_NORMALIZED,
    DOCS_REDACTED,
    PII_SUBJECTS,
    REDACTION_APP,
    STREAM_STATS,
)
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings


def make(settings: RedactionSettings, kafka: KafkaSettings) -> faust.App:
    return make_app(REDACTION_APP, kafka, settings.data_dir)


@dataclass(frozen=True)
class Topics:
    normalized: Any
    redacted: Any
    audit: Any
    dlq: Any
    stats: Any  # PII entities found, for the window tables
    subjects: Any  # who each redacted version mentions, as keyed hashes


def declare(app: faust.App) -> Topics:
    return Topics(topic(app, DOCS_NORMALIZED), topic(app, DOCS_REDACTED),
                  topic(app, AUDIT_BATCHES), topic(app, DEADLETTER), topic(app, STREAM_STATS),
                  topic(app, PII_SUBJECTS))
