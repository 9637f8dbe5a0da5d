"""The chunking Faust app and its topics."""

from services.chunking.settings import ChunkingSettings
from shared.contract.topics import CHUNKING_APP, CHUNKS, DEADLETTER, DOCS_REDACTED
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings

settings = ChunkingSettings()
kafka = KafkaSettings()
app = make_app(CHUNKING_APP, kafka, settings.data_dir)

redacted_topic = topic(app, DOCS_REDACTED)
chunks_topic = topic(app, CHUNKS)
dlq = topic(app, DEADLETTER)
