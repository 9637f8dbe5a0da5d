"""One-process worker settings (env prefix STREAMRAG_ONEBOX_)."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from shared.contract.topics import SERVICES
from shared.settings import ServiceSettings


class OneboxSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_ONEBOX_", frozen=True)

    # The fetch wait of the worker's one consumer (unset: STREAMRAG_KAFKA_QUERY_FETCH_MAX_WAIT_MS):
    # it also carries retrieval's search requests, so it waits the query path's time. The
    # idle fetch wait is every process's: STREAMRAG_KAFKA_IDLE_FETCH_MAX_WAIT_MS.
    fetch_max_wait_ms: int | None = Field(default=None, ge=1, le=60_000)
    # Which services this worker hosts (JSON list); a bench may run one of them on its own.
    services: tuple[str, ...] = tuple(SERVICES)

    @field_validator("services")
    @classmethod
    def _known(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(names) - set(SERVICES))
        if unknown:
            msg = f"STREAMRAG_ONEBOX_SERVICES: unknown services {unknown}"
            raise ValueError(msg)
        return names


def may_run_torch(services: tuple[str, ...]) -> bool:
    """Whether a hosted stage may run torch with its settings: only embedding and
    inference run models on it (redaction's spaCy runs on its own, chunking counts
    tokens), and with ONNX on CPU neither does."""
    from services.embedding.settings import EmbeddingSettings
    from services.inference.settings import InferenceSettings

    stages = {"embedding": EmbeddingSettings, "inference": InferenceSettings}
    return any(stages[name]().may_run_torch() for name in services if name in stages)
