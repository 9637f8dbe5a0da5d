"""The ingest Faust app, its topics and its tables."""

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

settings = IngestSettings()
kafka = KafkaSettings()
app = make_app(INGEST_APP, kafka, settings.data_dir)

raw_topic = topic(app, DOCS_RAW)
parsed_topic = topic(app, DOCS_PARSED)
normalized_topic = topic(app, DOCS_NORMALIZED)
dlq_raw = topic(app, DEADLETTER_RAW)
dlq = topic(app, DEADLETTER)
stats_topic = topic(app, STREAM_STATS)
doc_versions = app.Table(DOC_VERSIONS.name, partitions=DOC_VERSIONS.partitions)
# services.ingest.watermarks: per source and partition, keyed "source@partition".
source_clocks = app.Table(SOURCE_CLOCKS.name, partitions=SOURCE_CLOCKS.partitions)
