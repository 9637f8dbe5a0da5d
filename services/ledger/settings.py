"""Ledger service settings (env prefix STREAMRAG_LEDGERSVC_); the node is shared.LedgerSettings."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class LedgerServiceSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_LEDGERSVC_", frozen=True)

    # Backoff while the node is unreachable: doubles from initial to max per wait, and
    # gives up (LedgerUnavailable) once one call has been retrying for deadline seconds.
    retry_initial_s: float = Field(default=0.5, gt=0)
    retry_max_s: float = Field(default=8.0, gt=0)
    retry_deadline_s: float = Field(default=60.0, gt=0)
    rpc_timeout_s: float = Field(default=10.0, gt=0)  # one JSON-RPC request
    receipt_timeout_s: float = Field(default=120.0, gt=0)  # mined + confirmations
    poll_interval_s: float = Field(default=0.2, gt=0)
    # Reconciliation: every interval, check the anchors confirmed in the last window
    # seconds (at most max_batches, newest first) are still on chain; re-anchor the missing.
    reconcile_interval_s: float = Field(default=10.0, gt=0)
    reconcile_window_s: float = Field(default=600.0, gt=0)
    reconcile_max_batches: int = Field(default=256, ge=1)
