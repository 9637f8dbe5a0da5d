"""The embedding service's app and topics: `make` builds its own app (the distributed
deployment), `declare` its topics on whichever app it is built on (agents.build)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from services.embedding.settings import EmbeddingSettings
from shared.contract.topics import CHUNKS, CHUNKS_EMBEDDED, DEADLETTER, embedding_app
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings


def make(settings: EmbeddingSettings, kafka: KafkaSettings) -> faust.App:
    # One consumer group per model id: a new model re-embeds chunks.v1 from its beginning.
    return make_app(embedding_app(settings.encoder_model_id()), kafka, settings.data_dir)


@dataclass(frozen=True)
class Topics:
    chunks: Any
    embedded: Any
    dlq: Any


def declare(app: faust.App) -> Topics:
    return Topics(topic(app, CHUNKS), topic(app, CHUNKS_EMBEDDED), topic(app, DEADLETTER))
