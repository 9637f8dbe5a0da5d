"""Retrieval settings (env prefix STREAMRAG_RETRIEVAL_)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.retrieval.drift.detector import DriftConfig
from services.retrieval.index_config import IndexConfig
from shared.contract.retention import seconds_kept
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
    # A filtered search admitting at most this many chunks (a caller who may read little)
    # searches every IVF list through the filter's bitmap: exact recall; 0: never.
    exact_below: int = Field(default=4096, ge=0)
    # Seconds between snapshots of each shard to <data_dir>/retrieval-shards/, from which a
    # restarted shard resumes.
    snapshot_interval_s: float = Field(default=30.0, gt=0)
    # How long a document's text is kept, in ms (the mesh-wide STREAMRAG_AUDIT_TEXT_RETENTION_MS,
    # read under that name): a version ingested longer ago leaves the shards and their
    # snapshots, as its records leave the broker's topics. Unset or -1: kept.
    text_retention_ms: int | None = Field(default=None,
                                          validation_alias="STREAMRAG_AUDIT_TEXT_RETENTION_MS")
    # Keep a BM25 index beside FAISS (services/retrieval/lexical.py), for searches that carry
    # the question's text (inference's hybrid search); rebuilt from the texts on load.
    lexical: bool = True

    # Semantic drift (docs/design/drift.md): send each embedded document's summary to
    # drift.samples.v1 and judge each source, domain and model's windows of them.
    drift: bool = True
    # Length of a drift window, in seconds of the documents' ingest time.
    drift_window_s: float = Field(default=60.0, gt=0)
    # K: the judged windows a window is compared with.
    drift_history: int = Field(default=10, ge=2)
    # z-score of a window's centroid statistic above which it is a drift event.
    drift_threshold: float = Field(default=2.5, gt=0)
    # Documents a window needs to be judged (fewer: reported as too_few_docs, not kept).
    drift_min_docs: int = Field(default=20, ge=2)
    # Scored windows needed before the first judgement (reported as warming_up until then).
    drift_min_history: int = Field(default=5, ge=2)
    # Seconds a drift window stays open past its end for samples that arrive out of order,
    # beyond the pipeline's delay (docs/design/drift.md); unset: drift_grace_share of the
    # window.
    drift_grace_s: float | None = Field(default=None, ge=0)
    # The grace as a share of the window when drift_grace_s is unset: lateness scales with
    # the window (30 s for the default 60 s windows).
    drift_grace_share: float = Field(default=0.5, ge=0, le=10)
    # Least standard deviation of the log statistic that z is taken with: with K windows
    # the sample std is itself noisy, and a floor keeps that noise from raising events.
    drift_std_floor: float = Field(default=0.25, gt=0)
    # Documents named in a drift event (those moving farthest along the window's shift).
    drift_top_docs: int = Field(default=3, ge=0, le=20)
    # Words named in a drift event (most over-represented against the reference windows).
    drift_top_terms: int = Field(default=8, ge=0, le=50)
    # Source, domain and model combinations judged at once; the least recently fed beyond.
    drift_max_keys: int = Field(default=1000, ge=1)
    # A document ingested longer ago than this is not sampled: a replay of the compacted
    # topic (a fresh shard) is the past, not what the stream brings now.
    drift_max_age_s: float = Field(default=3600.0, gt=0)

    @property
    def drift_snapshot(self) -> Path:
        return self.data_dir / "retrieval-drift.json"

    def drift_config(self) -> DriftConfig:
        return DriftConfig(
            window_s=self.drift_window_s, history=self.drift_history,
            threshold=self.drift_threshold, min_docs=self.drift_min_docs,
            min_history=self.drift_min_history, grace_s=self.drift_grace_s,
            grace_share=self.drift_grace_share, std_floor=self.drift_std_floor,
            top_docs=self.drift_top_docs, top_terms=self.drift_top_terms,
            max_keys=self.drift_max_keys)

    @property
    def text_kept_s(self) -> float | None:
        """Seconds a document's text stays in the shards; None: no expiry."""
        return seconds_kept(self.text_retention_ms)

    @property
    def expire_every_s(self) -> float:
        """How often the shards are swept for expired text: a tenth of the retention,
        between 1 s and a minute."""
        return max(1.0, min(60.0, (self.text_kept_s or 600.0) / 10))

    @property
    def snapshot_dir(self) -> Path:
        return self.data_dir / "retrieval-shards"

    def index_config(self) -> IndexConfig:
        return IndexConfig(ivf_threshold=self.ivf_threshold, nlist_factor=self.ivf_nlist_factor,
                           nprobe=self.nprobe, use_gpu=self.use_gpu,
                           exact_below=self.exact_below)
