"""Chunking settings (env prefix STREAMRAG_CHUNKING_)."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class ChunkingSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_CHUNKING_", frozen=True)

    # Port of this worker's Prometheus /metrics (its stages' counters); 0: not served.
    # With several services in one process, the first one set serves them all.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # The address /metrics listens on.
    metrics_host: str = "127.0.0.1"

    # The most tokens in a chunk, counted with the embedding model's own tokenizer, special
    # tokens excluded: the model sees 256 with [CLS] and [SEP]. The overlap counts inside it.
    max_tokens: int = Field(default=254, ge=16, le=510)
    # Tokens of the previous chunk repeated at the start of the next (context for search).
    overlap_tokens: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _overlap_below_half(self) -> ChunkingSettings:
        if self.overlap_tokens >= self.max_tokens // 2:
            msg = "STREAMRAG_CHUNKING_OVERLAP_TOKENS must be below half of MAX_TOKENS"
            raise ValueError(msg)
        return self
