"""Redaction settings (env prefix STREAMRAG_REDACTION_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings

DEFAULT_ENTITIES = (
    "PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN",
    "IP_ADDRESS", "LOCATION", "CRYPTO", "SECRET",
)


class RedactionSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_REDACTION_", frozen=True)

    entities: tuple[str, ...] = DEFAULT_ENTITIES
    score_threshold: float = Field(default=0.4, ge=0.0, le=1.0)
    phone_regions: tuple[str, ...] = ("US", "GB", "DE", "FR", "IN")
    batch_max_docs: int = Field(default=32, ge=1)
    batch_within_s: float = Field(default=0.2, gt=0)
    # spaCy's NER cost grows with length; long documents are analysed in windows.
    window_chars: int = Field(default=20_000, ge=1000)
    window_overlap_chars: int = Field(default=200, ge=0)
