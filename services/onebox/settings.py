"""One-process worker settings (env prefix STREAMRAG_ONEBOX_)."""

from __future__ import annotations

from pydantic import field_validator
from pydantic_settings import SettingsConfigDict

from shared.contract.topics import SERVICES
from shared.settings import ServiceSettings


class OneboxSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_ONEBOX_", frozen=True)

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


def may_run_torch(services: tuple[str, ...], at_start: bool = False) -> bool:
    """Whether a hosted stage may run torch with its settings: only embedding and
    inference run models on it (redaction's spaCy runs on its own, chunking counts
    tokens), and with ONNX on CPU neither does. `at_start`: before the first query (a
    generator loaded on demand needs it only then)."""
    from services.embedding.settings import EmbeddingSettings
    from services.inference.settings import InferenceSettings

    if "embedding" in services and EmbeddingSettings().may_run_torch():
        return True
    return "inference" in services and InferenceSettings().may_run_torch(at_start)
