"""The redaction Faust app and its topics (the chain ends are rebuilt from audit.batches.v1)."""

from services.redaction.settings import RedactionSettings
from shared.contract.topics import (
    AUDIT_BATCHES,
    DEADLETTER,
    DOCS_NORMALIZED,
    DOCS_REDACTED,
    REDACTION_APP,
    STREAM_STATS,
)
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings

settings = RedactionSettings()
kafka = KafkaSettings()
app = make_app(REDACTION_APP, kafka, settings.data_dir)

normalized_topic = topic(app, DOCS_NORMALIZED)
redacted_topic = topic(app, DOCS_REDACTED)
audit_topic = topic(app, AUDIT_BATCHES)
dlq = topic(app, DEADLETTER)
stats_topic = topic(app, STREAM_STATS)  # PII entities found, for the window tables
