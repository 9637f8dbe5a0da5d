"""How long the evidence behind audit proofs is kept: the audit retention setting.

It governs every topic the contract marks `evidence` (docs.redacted.v1, audit.batches.v1,
ledger.anchors.v1): what `streamrag audit prove` and `verify` need for as long as the
anchors on chain may be asked about. The default keeps them forever; bring-up creates
them with it and refuses a broker whose topics say otherwise (shared/kafka/admin.py).
"""

from __future__ import annotations

from pydantic import ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contract.topics import FOREVER


class AuditRetentionSettings(BaseSettings):
    """How long the audit evidence is kept (env prefix STREAMRAG_AUDIT_, shared with
    shared.contract.audit_signing; the two keep their field names apart)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_AUDIT_", frozen=True)

    # How long the evidence topics (docs.redacted.v1, audit.batches.v1, ledger.anchors.v1)
    # keep records, in ms; -1 (the default): forever.
    retention_ms: int = FOREVER
    # How long docs.redacted.v1 keeps the redacted text, in ms; unset: retention_ms. Shorter
    # lets the text expire while the signed audit records still prove every leaf
    # (`streamrag audit prove` then says text_held: false).
    text_retention_ms: int | None = None

    @field_validator("retention_ms", "text_retention_ms")
    @classmethod
    def _forever_or_positive(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value != FOREVER and value < 1:
            name = f"STREAMRAG_AUDIT_{(info.field_name or '').upper()}"
            msg = f"{name} is -1 (keep forever) or a positive number of ms"
            raise ValueError(msg)
        return value

    def describe(self) -> str:
        if self.retention_ms == FOREVER:
            return "forever"
        return f"{self.retention_ms / 86_400_000:g} days ({self.retention_ms} ms)"
