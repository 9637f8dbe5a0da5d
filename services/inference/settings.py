"""Inference settings (env prefix STREAMRAG_INFERENCE_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class InferenceSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_INFERENCE_", frozen=True)

    # Localhost only by default: the API has no authentication of its own.
    grpc_host: str = "127.0.0.1"
    grpc_port: int = Field(default=50051, ge=0, le=65535)
    default_top_k: int = Field(default=5, ge=1)
    max_top_k: int = Field(default=50, ge=1, le=1000)
    # How long a gather waits for the slowest shard before answering with what it has.
    shard_timeout_s: float = Field(default=2.0, gt=0)
    max_question_chars: int = Field(default=4000, ge=1)
    answer_sentences: int = Field(default=3, ge=1)
    device: str = "auto"
    # Seconds a stopping server lets in-flight calls finish.
    grace_s: float = Field(default=2.0, ge=0)
