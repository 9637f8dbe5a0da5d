"""How long the evidence behind audit proofs is kept: the audit retention setting.

It governs every topic the contract marks `evidence` (docs.redacted.v1, audit.batches.v1,
ledger.anchors.v1): what `streamrag audit prove` and `verify` need for as long as the
anchors on chain may be asked about. The default keeps them forever; bring-up creates
them with it and refuses a broker whose topics say otherwise (shared/kafka/admin.py).
"""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contract.topics import DAY_MS, FOREVER


def seconds_kept(retention_ms: int | None) -> float | None:
    """A retention setting in seconds; None for unset or -1 (kept, no expiry)."""
    if retention_ms is None or retention_ms < 0:
        return None
    return retention_ms / 1000


class AuditRetentionSettings(BaseSettings):
    """How long the audit evidence, the text and the raw input are kept (env prefix
    STREAMRAG_AUDIT_, the raw retention STREAMRAG_RAW_RETENTION_MS; shared with
    shared.contract.audit_signing; the two keep their field names apart)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_AUDIT_", frozen=True,
                                      populate_by_name=True)

    # How long the evidence topics (docs.redacted.v1, audit.batches.v1, ledger.anchors.v1)
    # keep records, in ms; -1 (the default): forever.
    retention_ms: int = FOREVER
    # How long docs.redacted.v1 keeps the redacted text, in ms; unset: retention_ms. Shorter
    # lets the text expire while the signed audit records still prove every leaf
    # (`streamrag audit prove` then says text_held: false).
    text_retention_ms: int | None = None
    # How long the client's raw bytes (docs.raw.v1, and deadletter.raw.v1 that keeps
    # rejected ones) are kept, in ms; default one day. They may hold raw PII and nothing in
    # the mesh reads them again once ingest has committed past them, so they go far sooner
    # than the week of the other operational topics. Long enough to outlast an outage:
    # records ingest has not read when they expire are lost. Applies to topics created from
    # now on (an existing one keeps its retention: kafka-configs.sh --alter changes it).
    raw_retention_ms: int = Field(default=DAY_MS, validation_alias="STREAMRAG_RAW_RETENTION_MS")

    @field_validator("retention_ms", "text_retention_ms", "raw_retention_ms")
    @classmethod
    def _forever_or_positive(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value != FOREVER and value < 1:
            name = ("STREAMRAG_RAW_RETENTION_MS" if info.field_name == "raw_retention_ms" else
                    f"STREAMRAG_AUDIT_{(info.field_name or '').upper()}")
            msg = f"{name} is -1 (keep forever) or a positive number of ms"
            raise ValueError(msg)
        return value

    def describe(self) -> str:
        if self.retention_ms == FOREVER:
            return "forever"
        return f"{self.retention_ms / 86_400_000:g} days ({self.retention_ms} ms)"
