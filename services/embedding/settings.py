"""Embedding settings (env prefix STREAMRAG_EMBEDDING_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class EmbeddingSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_EMBEDDING_", frozen=True)

    device: str = "auto"  # auto: CUDA (fp16) when present, else CPU (fp32)
    batch_max_docs: int = Field(default=64, ge=1)
    batch_within_s: float = Field(default=0.05, gt=0)
    max_batch_tokens: int = Field(default=8192, ge=256)  # padded tokens per forward pass
