"""Query-audit settings of inference (env prefix STREAMRAG_INFERENCE_, shared with
services.inference.settings.InferenceSettings; the two keep their field names apart)."""

from __future__ import annotations

from eth_account import Account
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contract.audit_signing import DEV_QUERY_SIGNING_KEY


class QueryAuditSettings(BaseSettings):
    """How inference records the queries it answers (audit.queries.v1)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_INFERENCE_", frozen=True)

    # The key every query audit is signed with; its address must be in
    # STREAMRAG_AUDIT_QUERY_SIGNERS. The default is a public dev key: embedded mesh only.
    audit_signing_key: SecretStr = SecretStr(DEV_QUERY_SIGNING_KEY)
    # How often answered calls are signed and sent to audit.queries.v1.
    audit_flush_s: float = Field(default=0.2, gt=0)
    # The most answered calls held for sending; beyond it the oldest are dropped (counted as
    # streamrag_inference_query_audits_dropped_total and logged), never the answer delayed.
    audit_buffer_max: int = Field(default=100_000, ge=1)

    @field_validator("audit_signing_key")
    @classmethod
    def _a_signing_key(cls, key: SecretStr) -> SecretStr:
        """Refused at start, not at the first flush: a timer that fails hangs the worker."""
        try:
            Account.from_key(key.get_secret_value())
        except Exception as exc:  # eth-account raises several types for a bad key
            raise ValueError("not a secp256k1 private key (0x and 64 hex digits)") from exc
        return key
