"""Embedding settings (env prefix STREAMRAG_EMBEDDING_)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from services.embedding.batcher import BatchPolicy
from shared.settings import ServiceSettings

# Measured on 2 CPU cores (scripts/bench_ingest, NOTES.md): tokens/s grows with the batch
# only up to ~2-4k padded tokens and just ~1.3x over batch 1, so on CPU waiting buys
# little: latency mode closes at 2,048 padded tokens or after at most 100 ms. On a GPU a
# forward pass of 8k tokens costs about what one of 256 does, so throughput mode waits
# up to 1 s to fill 16k.
MODES: dict[str, BatchPolicy] = {
    "latency": BatchPolicy(token_budget=2048, max_items=64, min_wait_s=0.01,
                           max_wait_s=0.1, latency_target_s=1.0),
    "throughput": BatchPolicy(token_budget=16384, max_items=512, min_wait_s=0.05,
                              max_wait_s=1.0, latency_target_s=5.0),
}


class EmbeddingSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_EMBEDDING_", frozen=True)

    device: str = "auto"  # auto: CUDA (fp16) when present, else CPU (fp32)
    mode: Literal["latency", "throughput"] = "latency"
    # Each overrides the mode's value; batch_max_docs=1 with max_wait_s=0 is batch size 1.
    batch_max_docs: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=256)
    min_wait_s: float | None = Field(default=None, ge=0)
    max_wait_s: float | None = Field(default=None, ge=0)
    latency_target_s: float | None = Field(default=None, gt=0)
    max_batch_tokens: int = Field(default=8192, ge=256)  # padded tokens per forward pass
    inbox_max_docs: int = Field(default=1024, ge=1)  # decoded sets waiting for a batch

    def policy(self) -> BatchPolicy:
        base = MODES[self.mode]
        max_wait = base.max_wait_s if self.max_wait_s is None else self.max_wait_s
        min_wait = base.min_wait_s if self.min_wait_s is None else self.min_wait_s
        return BatchPolicy(
            token_budget=self.token_budget or base.token_budget,
            max_items=self.batch_max_docs or base.max_items,
            min_wait_s=min(min_wait, max_wait), max_wait_s=max_wait,
            latency_target_s=self.latency_target_s or base.latency_target_s,
        )
