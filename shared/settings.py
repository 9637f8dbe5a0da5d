"""Typed settings shared by every service: Kafka, the ledger node, and the common base.

Defaults are the embedded single-machine bring-up; docker-compose overrides them by env.
Nothing outside settings classes reads os.environ.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.contract import sizes

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
    # Once nothing was fetched or produced for idle_after_s, every consumer waits
    # idle_fetch_max_wait_ms per fetch instead (shared/kafka/fetch_wait.py; 0: never): an idle
    # mesh then costs a fraction of a core. activity_file (set by `streamrag up` for each
    # process it starts) shares "traffic seen" between the processes of one machine.
    # One process per service, idle (scripts/bench_latency --modes processes --before
    # STREAMRAG_KAFKA_IDLE_FETCH_MAX_WAIT_MS=500, one run): 200 ms cost 0.151 cores (broker
    # 0.079), 500 ms 0.096 (broker 0.039); light-load freshness p50/p95 213/243 vs 206/246
    # ms, the first document after a quiet spell p50/max 203/240 vs 329/496 ms.
    idle_fetch_max_wait_ms: int = Field(default=500, ge=0, le=60_000)
    idle_after_s: float = Field(default=5.0, gt=0)
    activity_file: Path | None = None
    # Start even though faust-streaming or aiokafka is not the exact release the fixes in
    # shared/kafka/ were written against (shared/kafka/patches.py VERSIONS): only for a
    # release someone has re-verified them on.
    allow_unverified_versions: bool = False
    session_timeout_s: float = Field(default=10.0, gt=0)
    rebalance_timeout_s: float = Field(default=3.0, gt=0)
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    replication_factor: int = Field(default=1, ge=1)
    producer_linger_ms: int = Field(default=0, ge=0)
    # The largest record any producer of the mesh sends and any consumer fetches (shared/
    # sizes.py). Only lower than the topics' max.message.bytes (the contract's limit), so a
    # record a producer sends is never one the broker refuses; tests lower it.
    max_record_bytes: int = Field(default=sizes.MAX_RECORD_BYTES, ge=sizes.MIN_RECORD_BYTES,
                                  le=sizes.MAX_RECORD_BYTES)
    # Compression of the mesh's own producers. Consumers read every codec whatever this
    # says (gzip built in; snappy, lz4 and zstd through cramjam, a dependency).
    producer_compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    # Apache Kafka with SASL (docker-compose): each service signs in as its own principal,
    # whose ACLs (shared/contract/acls.py) allow exactly the topics it reads and writes. The
    # embedded broker has no SASL: leave PLAINTEXT there.
    security_protocol: Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    sasl_username: str = ""
    sasl_password: SecretStr = SecretStr("")
    ssl_cafile: Path | None = None  # SASL_SSL: the CA that signed the broker's certificate

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> KafkaSettings:
        if self.sasl and not (self.sasl_username and self.sasl_password.get_secret_value()):
            msg = (f"STREAMRAG_KAFKA_SECURITY_PROTOCOL={self.security_protocol} needs "
                   "STREAMRAG_KAFKA_SASL_USERNAME and STREAMRAG_KAFKA_SASL_PASSWORD")
            raise ValueError(msg)
        return self

    @property
    def url(self) -> str:
        return "kafka://" + ";".join(self.bootstrap.split(","))

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.security_protocol != "SASL_SSL":
            return None
        return ssl.create_default_context(cafile=self.ssl_cafile)

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments that sign a plain aiokafka client (producer, consumer, admin)
        in; none on a PLAINTEXT broker."""
        if not self.sasl:
            return {}
        return {"security_protocol": self.security_protocol,
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.sasl_username,
                "sasl_plain_password": self.sasl_password.get_secret_value(),
                "ssl_context": self.ssl_context()}

    def faust_credentials(self) -> Any:
        """Faust's broker_credentials for the same sign-in (None on a PLAINTEXT broker)."""
        if not self.sasl:
            return None
        import faust  # only services build apps; the CLI's settings stay cheap to import

        return faust.SASLCredentials(username=self.sasl_username,
                                     password=self.sasl_password.get_secret_value(),
                                     mechanism=self.sasl_mechanism,
                                     ssl_context=self.ssl_context())


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
