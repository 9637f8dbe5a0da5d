"""The ingest service's app, topics and tables: `make` builds its own app (the distributed
deployment), `declare` its topics and tables on whichever app it is built on (agents.build)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faust

from services.ingest.settings import IngestSettings
from shared.contract.topics import (
    DEADLETTER,
    DEADLETTER_RAW,
    DOC_VERSIONS,
    DOCS_NORMALIZED,
    DOCS_PARSED,
    DOCS_RAW,
    INGEST_APP,
    SOURCE_CLOCKS,
    STREAM_STATS,
)
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings


def make(settings: IngestSettings, kafka: KafkaSettings) -> faust.App:
    return make_app(INGEST_APP, kafka, settings.data_dir)


@dataclass(frozen=True)
class Topics:
    raw: Any
    parsed: Any
    normalized: Any
    dlq_raw: Any
    dlq: Any
    stats: Any
    doc_versions: Any
    # services.ingest.watermarks: per source and partition, keyed "source@partition".
    source_clocks: Any


def declare(app: faust.App) -> Topics:
    return Topics(
        raw=topic(app, DOCS_RAW), parsed=topic(app, DOCS_PARSED),
        normalized=topic(app, DOCS_NORMALIZED), dlq_raw=topic(app, DEADLETTER_RAW),
        dlq=topic(app, DEADLETTER), stats=topic(app, STREAM_STATS),
        doc_versions=app.Table(DOC_VERSIONS.name, partitions=DOC_VERSIONS.partitions),
        source_clocks=app.Table(SOURCE_CLOCKS.name, partitions=SOURCE_CLOCKS.partitions))
