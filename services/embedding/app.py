"""The embedding Faust app and its topics."""

from services.embedding.settings import EmbeddingSettings
from shared.faust_app import make_app, topic
from shared.settings import KafkaSettings
from shared.topics import CHUNKS, CHUNKS_EMBEDDED, DEADLETTER, EMBEDDING_APP

settings = EmbeddingSettings()
kafka = KafkaSettings()
app = make_app(EMBEDDING_APP, kafka, settings.data_dir)

chunks_topic = topic(app, CHUNKS)
embedded_topic = topic(app, CHUNKS_EMBEDDED)
dlq = topic(app, DEADLETTER)
