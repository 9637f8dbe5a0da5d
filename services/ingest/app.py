"""The ingest Faust app, its topics and its table."""

from services.ingest.settings import IngestSettings
from shared.faust_app import make_app, topic
from shared.settings import KafkaSettings
from shared.topics import (
    DEADLETTER,
    DEADLETTER_RAW,
    DOC_VERSIONS,
    DOCS_NORMALIZED,
    DOCS_PARSED,
    DOCS_RAW,
    INGEST_APP,
)

settings = IngestSettings()
kafka = KafkaSettings()
app = make_app(INGEST_APP, kafka, settings.data_dir)

raw_topic = topic(app, DOCS_RAW)
parsed_topic = topic(app, DOCS_PARSED)
normalized_topic = topic(app, DOCS_NORMALIZED)
dlq_raw = topic(app, DEADLETTER_RAW)
dlq = topic(app, DEADLETTER)
doc_versions = app.Table(DOC_VERSIONS.name, partitions=DOC_VERSIONS.partitions)
