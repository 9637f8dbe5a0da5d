"""How many partitions each topic group of the contract has: a deployment setting that the
contract itself sizes its topics by, so it lives with the contract (below shared.settings,
which re-exports it)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class PartitionSettings(BaseSettings):
    """How many partitions each topic group of the contract has (env prefix STREAMRAG_KAFKA_,
    shared with KafkaSettings; the two keep their field names apart)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_KAFKA_", frozen=True)

    # Partitions of the document path (docs.*, chunks.*, search requests): the most workers
    # of ingest, redaction, chunking and embedding, and retrieval's shard count
    # (search.requests.v1 is co-partitioned with chunks.embedded.v1). Every process of a mesh
    # must see the same count; existing topics are checked against it at bring-up, and
    # `streamrag topics --grow N` raises it on a running deployment.
    partitions_documents: int = Field(default=4, ge=1, le=1024)
    # Partitions of the audit topics (audit.batches.v1, audit.queries.v1) and the ledger's
    # table on them.
    partitions_audit: int = Field(default=4, ge=1, le=1024)
    # Partitions of the topics inference gathers and counts (search replies, feedback, query
    # latency, stream counts, drift samples and windows) and its window tables on them.
    partitions_telemetry: int = Field(default=4, ge=1, le=1024)

    def count(self, group: str) -> int:
        """The partition count of a topic group ("single": always 1)."""
        return 1 if group == "single" else int(getattr(self, f"partitions_{group}"))
