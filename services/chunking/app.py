"""The chunking service's app and topics: `make` builds its own app (the distributed
deployment), `declare` its topics on whichever app it is built on (agents.build)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from services.chunking.settings import ChunkingSettings
from shared.contract.topics import CHUNKING_APP, CHUNKS, DEADLETTER, DOCS_REDACTED
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings


def make(settings: ChunkingSettings, kafka: KafkaSettings) -> faust.App:
    return make_app(CHUNKING_APP, kafka, settings.data_dir)


@dataclass(frozen=True)
class Topics:
    redacted: Any
    chunks: Any
    dlq: Any


def declare(app: faust.App) -> Topics:
    return Topics(topic(app, DOCS_REDACTED), topic(app, CHUNKS), topic(app, DEADLETTER))
