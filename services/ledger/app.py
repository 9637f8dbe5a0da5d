"""The ledger Faust app, its topics and its table."""

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
from shared.settings import KafkaSettings, LedgerSettings

settings = LedgerServiceSettings()
ledger = LedgerSettings()
kafka = KafkaSettings()
app = make_app(LEDGER_APP, kafka, settings.data_dir)

batches_topic = topic(app, AUDIT_BATCHES)
queries_topic = topic(app, AUDIT_QUERIES)
anchors_topic = topic(app, LEDGER_ANCHORS)
dlq = topic(app, DEADLETTER)
anchored = app.Table(ANCHORED.name, partitions=ANCHORED.partitions)
