"""Retrieval settings (env prefix STREAMRAG_RETRIEVAL_)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from shared.embedder import MODEL_ID
from shared.settings import ServiceSettings


class RetrievalSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_RETRIEVAL_", frozen=True)

    model_id: str = MODEL_ID
    dim: int = 384
    use_gpu: bool = True  # faiss-gpu when the build and a GPU are present
