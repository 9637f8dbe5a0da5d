"""Retrieval settings (env prefix STREAMRAG_RETRIEVAL_)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.retrieval.index_config import IndexConfig
from shared.settings import ServiceSettings


class RetrievalSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_RETRIEVAL_", frozen=True)

    # Port of this worker's Prometheus /metrics (its stages' counters); 0: not served.
    # With several services in one process, the first one set serves them all.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # The address /metrics listens on.
    metrics_host: str = "127.0.0.1"

    # The most embedding models indexed side by side: every model id on chunks.embedded.v1
    # gets its own index (one shard per partition each; services/retrieval/models.py), and a
    # record that would start one more is dead-lettered (too_many_models).
    max_models: int = Field(default=3, ge=1)
    # Model ids not indexed, whose snapshots are deleted at start (JSON list): the old
    # model's index, once inference has switched to the new one.
    drop_models: frozenset[str] = frozenset()
    # Train IVF k-means on a GPU when faiss-gpu and a GPU are present.
    use_gpu: bool = True
    # Chunks in a shard before its exact index becomes IVF.
    ivf_threshold: int = Field(default=20_000, ge=1)
    # IVF lists per shard: nlist = factor x sqrt(chunks).
    ivf_nlist_factor: float = Field(default=1.0, gt=0)
    # IVF lists searched per query (more: better recall, slower).
    nprobe: int = Field(default=16, ge=1)
    # How filtered searches work: selector (an id bitmap from the filter columns) or
    # overfetch (search wider, then filter).
    filter_strategy: Literal["selector", "overfetch"] = "selector"
    # Seconds between snapshots of each shard to <data_dir>/retrieval-shards/, from which a
    # restarted shard resumes.
    snapshot_interval_s: float = Field(default=30.0, gt=0)
    # Keep a BM25 index beside FAISS (services/retrieval/lexical.py), for searches that carry
    # the question's text (inference's hybrid search); rebuilt from the texts on load.
    lexical: bool = True

    @property
    def snapshot_dir(self) -> Path:
        return self.data_dir / "retrieval-shards"

    def index_config(self) -> IndexConfig:
        return IndexConfig(ivf_threshold=self.ivf_threshold, nlist_factor=self.ivf_nlist_factor,
                           nprobe=self.nprobe, use_gpu=self.use_gpu)
