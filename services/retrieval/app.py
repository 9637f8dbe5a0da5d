"""The retrieval service's app and topics: `make` builds its own app (the distributed
deployment), `declare` its topics on whichever app it is built on (agents.build).

No table: each shard's state lives in its snapshot plus chunks.embedded.v1 itself (compacted,
keyed by document), replayed from the snapshot's offset. A changelog table would duplicate
every chunk set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from services.retrieval.settings import RetrievalSettings
from shared.contract.topics import (
    CHUNKS_EMBEDDED,
    DEADLETTER,
    DRIFT_SAMPLES,
    DRIFT_WINDOWS,
    RETRIEVAL_APP,
    SEARCH_REPLIES,
    SEARCH_REQUESTS,
)
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings


def make(settings: RetrievalSettings, kafka: KafkaSettings) -> faust.App:
    return make_app(RETRIEVAL_APP, kafka, settings.data_dir)


@dataclass(frozen=True)
class Topics:
    # Never committed: a shard's position is its snapshot's offset, and a committed offset
    # would only give Faust a place to seek the consumer to instead
    # (services/retrieval/positions.py).
    embedded: Any
    requests: Any
    replies: Any
    dlq: Any
    # Semantic drift (services/retrieval/drift/): samples re-keyed by source, judged reports.
    drift_samples: Any
    drift_windows: Any


def declare(app: faust.App) -> Topics:
    return Topics(embedded=topic(app, CHUNKS_EMBEDDED, committed=False),
                  requests=topic(app, SEARCH_REQUESTS), replies=topic(app, SEARCH_REPLIES),
                  dlq=topic(app, DEADLETTER), drift_samples=topic(app, DRIFT_SAMPLES),
                  drift_windows=topic(app, DRIFT_WINDOWS))
