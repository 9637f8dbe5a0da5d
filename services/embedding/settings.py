"""Embedding settings (env prefix STREAMRAG_EMBEDDING_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.batching.queue import BatchLimits
from shared.encoder.runtime import EncoderSettings, Runtime
from shared.settings import ServiceSettings


class EmbeddingSettings(ServiceSettings, EncoderSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_EMBEDDING_", frozen=True)

    # device, encoder_threads, model_cache_dir: shared/encoder/runtime.py. ONNX Runtime
    # (same weights and model id, cosine to torch >= 0.99999) encoded 8 chunks of 254
    # tokens 1.2x as fast as torch on one thread and 1.8x on two, and a lone short chunk
    # 2x (scripts/bench_encoder on the loaded 2-core machine, where torch's second thread
    # collapses); CUDA devices and machines without onnxruntime run torch.
    encoder_runtime: Runtime = "onnx"
    # One intra-op thread per forward pass, and the passes of a batch side by side on one
    # worker per core. A pass then never waits on another thread: when redaction takes a
    # core, one pass slows down instead of every pass of a two-thread session stalling at
    # its barriers. 100 SciFact abstracts encoded alone, passes of 1024 tokens
    # (scripts/bench_encoder --passes --corpus $BEIR/scifact-train): 1 thread
    # 11.1 docs/s, one session of 2 threads 15.2, 2 passes of 1 thread side by side 22.7;
    # with one core kept busy by another process 10.9, 11.6 and 13.8.
    encoder_threads: int = Field(default=1, ge=0)
    encoder_workers: int = Field(default=0, ge=0)

    # A batch is cut whenever the encoder is free (shared/batching), within two limits,
    # and runs as forward passes of at most forward_tokens padded tokens (chunks x the
    # longest). Passes of 1024 tokens ran 11.1 docs/s on one thread against 10.5 for 2048,
    # and 22.7 against 19.3 two side by side (same run); a batch of max_batch_tokens
    # gives each of two workers one such pass. On a GPU a pass of 16k costs about what
    # one of 256 does (set both in docker-compose.gpu.yml). batch_max_docs=1 is batch
    # size 1.
    max_batch_tokens: int = Field(default=2048, ge=256)
    forward_tokens: int = Field(default=1024, ge=256)
    batch_max_docs: int = Field(default=64, ge=1)
    inbox_max_docs: int = Field(default=1024, ge=1)  # decoded sets waiting for a batch

    def limits(self) -> BatchLimits:
        return BatchLimits(max_tokens=self.max_batch_tokens, max_requests=self.batch_max_docs)

    def may_run_torch(self) -> bool:
        return self.encoder_may_run_torch(self.model_path)
