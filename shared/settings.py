"""Typed settings shared by every service: Kafka, the ledger node, and the common base.

Defaults are the embedded single-machine bring-up; docker-compose overrides them by env.
Nothing outside settings classes reads os.environ.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# anvil's first well-known dev account: only a default for the embedded dev chain.
ANVIL_DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"


class KafkaSettings(BaseSettings):
    """How every service reaches the Kafka-protocol broker (env prefix STREAMRAG_KAFKA_)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_KAFKA_", frozen=True)

    bootstrap: str = "127.0.0.1:19092"
    # The embedded broker does not answer a waiting fetch early (real Kafka does), so a
    # caught-up consumer waits up to this long for the next record. Pipeline hops can
    # afford 50 ms (freshness is judged in seconds), and fewer idle polls leave the CPU
    # to the work; the interactive query path (retrieval's consumer, inference's reply
    # reader) uses the shorter query wait.
    fetch_max_wait_ms: int = Field(default=50, ge=1, le=60_000)
    query_fetch_max_wait_ms: int = Field(default=10, ge=1, le=60_000)
    session_timeout_s: float = Field(default=10.0, gt=0)
    rebalance_timeout_s: float = Field(default=3.0, gt=0)
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    replication_factor: int = Field(default=1, ge=1)
    producer_linger_ms: int = Field(default=0, ge=0)

    @property
    def url(self) -> str:
        return "kafka://" + ";".join(self.bootstrap.split(","))


class LedgerSettings(BaseSettings):
    """How to reach the Ethereum node that anchors audit roots (env prefix STREAMRAG_LEDGER_)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_LEDGER_", frozen=True)

    rpc_url: str = "http://127.0.0.1:18545"
    private_key: SecretStr = SecretStr(ANVIL_DEV_KEY)
    # Empty: deploy the anchor contract on first start and remember it in state_dir.
    contract_address: str = ""
    confirmations: int = Field(default=0, ge=0)
    chain_id: int | None = None


class ServiceSettings(BaseSettings):
    """Settings every service has; subclasses set their own env prefix."""

    model_config = SettingsConfigDict(frozen=True)

    log_level: str = "INFO"
    data_dir: Path = Path(".run/data")
