"""The shards this worker owns, one per partition of chunks.embedded.v1."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from services.retrieval.index import Shard
from services.retrieval.settings import RetrievalSettings
from shared.codec import decode
from shared.records import EmbeddedChunkSet

log = logging.getLogger(__name__)


class Shards:
    def __init__(self, settings: RetrievalSettings, table: Mapping[str, Any]) -> None:
        self.settings = settings
        self.table = table
        self.by_partition: dict[int, Shard] = {}

    def get(self, partition: int) -> Shard:
        """The shard of `partition`, rebuilt from the recovered table on first use."""
        shard = self.by_partition.get(partition)
        if shard is None:
            shard = Shard(self.settings.model_id, self.settings.dim, self.settings.use_gpu)
            for value in list(self.table.values()):
                if value["p"] == partition:
                    shard.apply(decode(EmbeddedChunkSet, value["set"].encode()))
            self.by_partition[partition] = shard
            log.info("shard %d ready: %d chunks", partition, len(shard))
        return shard

    def drop(self, partitions: Iterable[int]) -> None:
        """Forget shards whose partitions moved to another worker in a rebalance."""
        for p in partitions:
            if self.by_partition.pop(p, None) is not None:
                log.info("shard %d released", p)
