"""Chunking settings (env prefix STREAMRAG_CHUNKING_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class ChunkingSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_CHUNKING_", frozen=True)

    # Measured with the embedding model's own tokenizer, special tokens excluded.
    max_tokens: int = Field(default=254, ge=16, le=510)
