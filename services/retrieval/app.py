"""The retrieval Faust app and its topics.

No table: each shard's state lives in its snapshot plus chunks.embedded.v1 itself (compacted,
keyed by document), replayed from the snapshot's offset. A changelog table would duplicate
every chunk set.
"""

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

settings = RetrievalSettings()
kafka = KafkaSettings()
app = make_app(RETRIEVAL_APP, kafka, settings.data_dir)

# Never committed: a shard's position is its snapshot's offset, and a committed offset
# would only give Faust a place to seek the consumer to instead (services/retrieval/positions.py).
embedded_topic = topic(app, CHUNKS_EMBEDDED, committed=False)
requests_topic = topic(app, SEARCH_REQUESTS)
replies_topic = topic(app, SEARCH_REPLIES)
dlq = topic(app, DEADLETTER)
# Semantic drift (services/retrieval/drift/): samples re-keyed by source, judged reports out.
drift_samples_topic = topic(app, DRIFT_SAMPLES)
drift_windows_topic = topic(app, DRIFT_WINDOWS)
