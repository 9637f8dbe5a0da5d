"""The ledger service's app, topics and table: `make` builds its own app (the distributed
deployment), `declare` its topics and table on whichever app it is built on
(agents.build)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from services.ledger.settings import LedgerServiceSettings
from shared.contract.topics import (
    ANCHORED,
    AUDIT_BATCHES,
    AUDIT_QUERIES,
    DEADLETTER,
    LEDGER_ANCHORS,
    LEDGER_APP,
)
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings


def make(settings: LedgerServiceSettings, kafka: KafkaSettings) -> faust.App:
    return make_app(LEDGER_APP, kafka, settings.data_dir)


@dataclass(frozen=True)
class Topics:
    batches: Any
    queries: Any
    anchors: Any
    dlq: Any
    anchored: Any  # the table: batch id -> its Anchor (JSON)


def declare(app: faust.App) -> Topics:
    return Topics(topic(app, AUDIT_BATCHES), topic(app, AUDIT_QUERIES),
                  topic(app, LEDGER_ANCHORS), topic(app, DEADLETTER),
                  app.Table(ANCHORED.name, partitions=ANCHORED.partitions))
