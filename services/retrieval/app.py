"""The retrieval Faust app, its topics and its table."""

from services.retrieval.settings import RetrievalSettings
from shared.faust_app import make_app, topic
from shared.settings import KafkaSettings
from shared.topics import (
    CHUNKS_EMBEDDED,
    DEADLETTER,
    INDEXED_DOCS,
    RETRIEVAL_APP,
    SEARCH_REPLIES,
    SEARCH_REQUESTS,
)

settings = RetrievalSettings()
kafka = KafkaSettings()
app = make_app(RETRIEVAL_APP, kafka, settings.data_dir)

embedded_topic = topic(app, CHUNKS_EMBEDDED)
requests_topic = topic(app, SEARCH_REQUESTS)
replies_topic = topic(app, SEARCH_REPLIES)
dlq = topic(app, DEADLETTER)
# doc id -> {"p": partition, "set": EmbeddedChunkSet JSON}: the shards are rebuilt from it.
indexed_docs = app.Table(INDEXED_DOCS.name, partitions=INDEXED_DOCS.partitions)
