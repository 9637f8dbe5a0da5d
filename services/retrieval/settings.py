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

    # Every embedding model id on chunks.embedded.v1 gets its own index (one shard per
    # partition each; services/retrieval/models.py), up to max_models; a record that would
    # start one more is dead-lettered (too_many_models). A model in drop_models (JSON list)
    # is not indexed and its snapshots are deleted at start: the old model's index, once
    # inference has switched to the new one.
    max_models: int = Field(default=3, ge=1)
    drop_models: frozenset[str] = frozenset()
    use_gpu: bool = True  # IVF k-means on a GPU when faiss-gpu and a GPU are present
    ivf_threshold: int = Field(default=20_000, ge=1)  # chunks per shard before IVF
    ivf_nlist_factor: float = Field(default=1.0, gt=0)  # nlist = factor * sqrt(chunks)
    nprobe: int = Field(default=16, ge=1)
    # selector: an id bitmap from the filter columns; overfetch: search wider, then filter.
    filter_strategy: Literal["selector", "overfetch"] = "selector"
    snapshot_interval_s: float = Field(default=30.0, gt=0)
    # A BM25 index beside FAISS (services/retrieval/lexical.py), for searches that carry
    # the question's text (inference's hybrid search); rebuilt from the texts on load.
    lexical: bool = True

    @property
    def snapshot_dir(self) -> Path:
        return self.data_dir / "retrieval-shards"

    def index_config(self) -> IndexConfig:
        return IndexConfig(ivf_threshold=self.ivf_threshold, nlist_factor=self.ivf_nlist_factor,
                           nprobe=self.nprobe, use_gpu=self.use_gpu)
