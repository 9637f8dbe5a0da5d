"""The embedding Faust app and its topics."""

from services.embedding.settings import EmbeddingSettings
from shared.contract.topics import CHUNKS, CHUNKS_EMBEDDED, DEADLETTER, embedding_app
from shared.kafka.app import make_app, topic
from shared.settings import KafkaSettings

settings = EmbeddingSettings()
kafka = KafkaSettings()
# One consumer group per model id: a new model re-embeds chunks.v1 from its beginning.
app = make_app(embedding_app(settings.encoder_model_id()), kafka, settings.data_dir)

chunks_topic = topic(app, CHUNKS)
embedded_topic = topic(app, CHUNKS_EMBEDDED)
dlq = topic(app, DEADLETTER)
