"""Embedding settings (env prefix STREAMRAG_EMBEDDING_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.batching.queue import BatchLimits
from shared.encoder.runtime import EncoderSettings, Runtime
from shared.settings import ServiceSettings


class EmbeddingSettings(ServiceSettings, EncoderSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_EMBEDDING_", frozen=True)

    # Port of this worker's Prometheus /metrics (its stages' counters); 0: not served.
    # With several services in one process, the first one set serves them all.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # The address /metrics listens on.
    metrics_host: str = "127.0.0.1"

    # Which runtime encodes chunks (device, model and graph cache: shared/encoder/runtime.py).
    # ONNX Runtime, from the same weights and under the same model id, is faster than torch
    # on CPU at one and two threads and does not collapse when another process takes a
    # core (docs/benchmarks.md, "Encoder runtime"); CUDA devices and machines without
    # onnxruntime run torch.
    encoder_runtime: Runtime = "onnx"
    # Intra-op threads of one forward pass. One, so a pass never waits on another thread of
    # its own: when redaction takes a core one pass slows down instead of every pass of a
    # two-thread session stalling at its barriers (docs/benchmarks.md, "Encoder runtime").
    encoder_threads: int = Field(default=1, ge=0)
    # Forward passes of one batch run side by side on this many workers (0: one per usable
    # core), each pass on encoder_threads threads.
    encoder_workers: int = Field(default=0, ge=0)

    # The most padded tokens (chunks x the longest) in one batch. A batch is cut whenever the
    # encoder is free (shared/batching); twice forward_tokens gives each of two workers one
    # pass. On a GPU a pass of 16k costs about what one of 256 does (docker-compose.gpu.yml
    # raises both).
    max_batch_tokens: int = Field(default=2048, ge=256)
    # The most padded tokens in one forward pass of a batch; passes of 1024 ran faster than
    # passes of 2048 on CPU (docs/benchmarks.md, "Encoder runtime").
    forward_tokens: int = Field(default=1024, ge=256)
    # The most documents' chunk sets in one batch (1: batch size 1).
    batch_max_docs: int = Field(default=64, ge=1)
    # Decoded chunk sets that may wait for a batch at once (the batcher's queue capacity).
    inbox_max_docs: int = Field(default=1024, ge=1)

    def limits(self) -> BatchLimits:
        return BatchLimits(max_tokens=self.max_batch_tokens, max_requests=self.batch_max_docs)

    def may_run_torch(self) -> bool:
        return self.encoder_may_run_torch(self.model_path)
