"""Embedding settings (env prefix STREAMRAG_EMBEDDING_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.batching.queue import BatchLimits
from shared.encoder_runtime import EncoderSettings, Runtime
from shared.settings import ServiceSettings


class EmbeddingSettings(ServiceSettings, EncoderSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_EMBEDDING_", frozen=True)

    # device, encoder_threads, model_cache_dir: shared/encoder_runtime.py. ONNX Runtime
    # (same weights and model id, cosine to torch >= 0.99999) encoded 8 chunks of 254
    # tokens 1.2x as fast as torch on one thread and 1.8x on two, and a lone short chunk
    # 2x (scripts/bench_encoder on the loaded 2-core machine, where torch's second thread
    # collapses); CUDA devices and machines without onnxruntime run torch.
    encoder_runtime: Runtime = "onnx"
    # One intra-op thread: the other core is redaction's. With one per core (0), ONNX
    # Runtime's threads stalled whenever redaction held a core, and a one-process bulk
    # burst ran 2.28-2.78 docs/s (0.26-0.37x the raw rate) against 4.59 (0.53x) on one
    # thread (scripts/bench_ingest --modes onebox, SciFact, separate runs).
    encoder_threads: int = Field(default=1, ge=0)

    # A batch is cut whenever the encoder is free (shared/batching), within two limits.
    # Padded tokens (chunks x the longest) per batch and per forward pass: measured on 2
    # CPU cores (scripts/bench_ingest, NOTES.md) tokens/s stops growing at ~2-4k, so the
    # default stays there; on a GPU a pass of 16k costs about what one of 256 does (set it
    # in docker-compose.gpu.yml). batch_max_docs=1 is batch size 1.
    max_batch_tokens: int = Field(default=2048, ge=256)
    batch_max_docs: int = Field(default=64, ge=1)
    inbox_max_docs: int = Field(default=1024, ge=1)  # decoded sets waiting for a batch

    def limits(self) -> BatchLimits:
        return BatchLimits(max_tokens=self.max_batch_tokens, max_requests=self.batch_max_docs)
