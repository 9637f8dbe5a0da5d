"""Ledger service settings (env prefix STREAMRAG_LEDGER_, shared with the node it anchors on:
shared.settings.LedgerSettings; the two classes keep their field names apart)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class LedgerServiceSettings(ServiceSettings):
    """How the ledger service retries the node and reconciles its anchors."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_LEDGER_", frozen=True)

    # Port of this worker's Prometheus /metrics (its stages' counters); 0: not served.
    # With several services in one process, the first one set serves them all.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # The address /metrics listens on.
    metrics_host: str = "127.0.0.1"

    # First wait before retrying an unreachable node; each wait doubles up to retry_max_s.
    retry_initial_s: float = Field(default=0.5, gt=0)
    # Longest wait between two retries of an unreachable node.
    retry_max_s: float = Field(default=8.0, gt=0)
    # A call that has been retrying this long gives up (LedgerUnavailable).
    retry_deadline_s: float = Field(default=60.0, gt=0)
    # Timeout of one JSON-RPC request to the node.
    rpc_timeout_s: float = Field(default=10.0, gt=0)
    # How long an anchor transaction may take to be mined and reach its confirmations.
    receipt_timeout_s: float = Field(default=120.0, gt=0)
    # How often a pending transaction's receipt is asked for.
    poll_interval_s: float = Field(default=0.2, gt=0)
    # How often the anchors confirmed lately are checked to be still on chain (the missing
    # are anchored again).
    reconcile_interval_s: float = Field(default=10.0, gt=0)
    # How far back, in seconds of confirmation time, reconciliation looks.
    reconcile_window_s: float = Field(default=600.0, gt=0)
    # The most anchors one reconciliation checks, newest first.
    reconcile_max_batches: int = Field(default=256, ge=1)
    # The most query audits (audit.queries.v1) one anchored batch holds.
    query_batch_max: int = Field(default=256, ge=1)
    # How long the ledger gathers query audits before it anchors what it has.
    query_batch_within_s: float = Field(default=1.0, gt=0)
