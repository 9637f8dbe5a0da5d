"""Typed settings shared by every service: Kafka, the ledger node, and the common base.

Defaults are the embedded single-machine bring-up; docker-compose overrides them by env.
Nothing outside settings classes reads os.environ.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared import logsafe
from shared.contract import sizes
from shared.contract.partitions import PartitionSettings  # noqa: F401 (re-exported)
from shared.errors import ConfigError

# anvil's first well-known dev account: only a default for the embedded dev chain.
ANVIL_DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"


class KafkaSettings(BaseSettings):
    """How every service reaches the Kafka-protocol broker (env prefix STREAMRAG_KAFKA_)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_KAFKA_", frozen=True)

    # The broker's host:port list, comma-separated.
    bootstrap: str = "127.0.0.1:19092"
    # How long the mesh's own plain consumers (inference's reply and config readers,
    # retrieval's position reader) let the broker hold a fetch that has nothing to return.
    # Kafka answers a waiting fetch as soon as a record arrives, so this is no latency: a
    # long wait only makes an idle consumer cheap. (Faust's consumers wait 1.5 s, its own.)
    query_fetch_max_wait_ms: int = Field(default=500, ge=1, le=60_000)
    # Start even though faust-streaming or aiokafka is not the exact release the fixes in
    # shared/kafka/ were written against (shared/kafka/patches.py VERSIONS): only for a
    # release someone has re-verified them on.
    allow_unverified_versions: bool = False
    # How long a worker's own clients wait for a broker that refuses connections (one
    # restarting) before the worker exits to be restarted: an outage shorter than this
    # costs the query path nothing.
    outage_s: float = Field(default=120.0, gt=0)
    # Consumer group session timeout: a member silent this long is dropped from the group.
    session_timeout_s: float = Field(default=10.0, gt=0)
    # How long a rebalance waits for the group's members to rejoin.
    rebalance_timeout_s: float = Field(default=3.0, gt=0)
    # How often a consumer tells the group coordinator it is alive.
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    # Replicas of each topic the mesh creates (1 on the embedded single broker).
    replication_factor: int = Field(default=1, ge=1)
    # min.insync.replicas of each topic the mesh creates: with acks=all a write is
    # acknowledged once this many replicas hold it, and refused (NotEnoughReplicas) while
    # fewer are in sync. At most the replication factor; 1 on the embedded broker.
    min_insync_replicas: int = Field(default=1, ge=1)
    # Idempotent producers: each record is written once per partition even when a send is
    # retried after a lost answer (a broker failover, a timeout).
    producer_idempotence: bool = True
    # How long producers hold a record to batch it with the next (0: send at once, for latency).
    producer_linger_ms: int = Field(default=0, ge=0)
    # The largest record any producer of the mesh sends and any consumer fetches
    # (shared/contract/sizes.py). Only lower than the topics' max.message.bytes (the
    # contract's limit), so a record a producer sends is never one the broker refuses.
    max_record_bytes: int = Field(default=sizes.MAX_RECORD_BYTES, ge=sizes.MIN_RECORD_BYTES,
                                  le=sizes.MAX_RECORD_BYTES)
    # Compression of the mesh's own producers. Consumers read every codec whatever this
    # says (gzip built in; snappy, lz4 and zstd through cramjam, a dependency).
    producer_compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    # How clients connect to the broker: PLAINTEXT, or SASL without or with TLS. With Apache
    # Kafka and SASL (docker-compose) each service signs in as its own principal, whose ACLs
    # (shared/contract/acls.py) allow exactly the topics it reads and writes; the embedded
    # broker has no SASL: PLAINTEXT.
    security_protocol: Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    # The SASL mechanism of the sign-in (services use SCRAM; the admin jobs PLAIN).
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    # The principal a SASL client signs in as.
    sasl_username: str = ""
    # That principal's password.
    sasl_password: SecretStr = SecretStr("")
    # SASL_SSL: the CA that signed the broker's certificate (unset: the system's CAs).
    ssl_cafile: Path | None = None

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> KafkaSettings:
        if self.sasl and not (self.sasl_username and self.sasl_password.get_secret_value()):
            msg = (f"STREAMRAG_KAFKA_SECURITY_PROTOCOL={self.security_protocol} needs "
                   "STREAMRAG_KAFKA_SASL_USERNAME and STREAMRAG_KAFKA_SASL_PASSWORD")
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _insync_within_replicas(self) -> KafkaSettings:
        if self.min_insync_replicas > self.replication_factor:
            msg = (f"STREAMRAG_KAFKA_MIN_INSYNC_REPLICAS={self.min_insync_replicas} exceeds "
                   f"STREAMRAG_KAFKA_REPLICATION_FACTOR={self.replication_factor}: no write "
                   "could ever be acknowledged")
            raise ValueError(msg)
        return self

    @property
    def url(self) -> str:
        return "kafka://" + ";".join(self.bootstrap.split(","))

    def producer_options(self) -> dict[str, Any]:
        """Keyword arguments of every plain aiokafka producer of the mesh: a record counts as
        sent once every in-sync replica holds it (acks=all), idempotent unless
        producer_idempotence is off."""
        return {"acks": "all", "enable_idempotence": self.producer_idempotence}

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
    """How to reach the Ethereum node that anchors audit roots (env prefix STREAMRAG_LEDGER_,
    shared with the ledger service's own settings; the two keep their field names apart)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_LEDGER_", frozen=True)

    # JSON-RPC URL of the node.
    rpc_url: str = "http://127.0.0.1:18545"
    # The key the ledger service sends anchor transactions with (default: anvil's first dev
    # account, for the embedded chain only).
    private_key: SecretStr = SecretStr(ANVIL_DEV_KEY)
    # The anchor contract's address; empty: deploy it on first start and remember it in the
    # data dir.
    contract_address: str = ""
    # Blocks mined on top of an anchor before it counts as confirmed.
    confirmations: int = Field(default=0, ge=0)
    # The chain id the node must report (unset: whatever it reports), so a key is never
    # used on the wrong chain.
    chain_id: int | None = None


# Read before every process took one data dir and one log level, and before the ledger
# service's own knobs moved to STREAMRAG_LEDGER_: refused at start rather than ignored, so an
# old .env never quietly starts a service on an empty data dir.
RETIRED = {f"STREAMRAG_{prefix}_{name}": f"STREAMRAG_{name}"
           for prefix in ("INGEST", "REDACTION", "CHUNKING", "EMBEDDING", "RETRIEVAL",
                          "INFERENCE", "LEDGERSVC", "ONEBOX")
           for name in ("DATA_DIR", "LOG_LEVEL")}


def replacement(name: str) -> str | None:
    """The variable that took over from a retired one; None for any other name."""
    name = name.upper()
    if name.startswith("STREAMRAG_LEDGERSVC_"):
        return RETIRED.get(name, name.replace("_LEDGERSVC_", "_LEDGER_"))
    return RETIRED.get(name)


def refuse_retired(environ: Mapping[str, str] | None = None) -> None:
    """ConfigError naming every retired variable set and the one that replaced it.

    A ConfigError, not a ValueError: raised inside a settings validator, pydantic would
    wrap a ValueError in a ValidationError, which logs print as `<withheld>` (it may quote
    input); our own message names only variables and is shown whole."""
    found = sorted((name, new) for name in (os.environ if environ is None else environ)
                   if (new := replacement(name)) is not None)
    if found:
        msg = "; ".join(f"{name} is no longer read: set {new} instead" for name, new in found)
        raise ConfigError(msg)


@dataclass(frozen=True)
class Listener:
    """A port a service listens on (checked free before the worker joins its group:
    shared/worker/ports.py)."""

    setting: str  # the environment variable that sets the port
    host: str
    port: int  # 0: see `zero`; never taken
    zero: str = "not served"  # what 0 means for this setting


class ProcessSettings(BaseSettings):
    """What every service process reads under the same name (env prefix STREAMRAG_): one
    data dir and one log level per process, whichever services it hosts."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_", frozen=True, populate_by_name=True)

    # Where each Faust app of the process keeps its tables, offsets and status files
    # (<data_dir>/<app id>/); one per machine or container, shared by the services in it.
    data_dir: Path = Field(default=Path(".run/data"), validation_alias="STREAMRAG_DATA_DIR")
    # Python logging level of the worker and Faust (DEBUG, INFO, WARNING, ERROR).
    log_level: str = Field(default="INFO", validation_alias="STREAMRAG_LOG_LEVEL")

    @model_validator(mode="before")
    @classmethod
    def _no_retired_names(cls, data: Any) -> Any:
        refuse_retired()
        return data

    @model_validator(mode="after")
    def _named_in_logs(self) -> ProcessSettings:
        # Paths and setting names are the operator's, not a record's: an error about them
        # may name them in logs (shared/logsafe.py).
        logsafe.allow(*env_names(type(self)).values(),
                      *(v for v in self.__dict__.values() if isinstance(v, Path)))
        return self

    def ensure_data_dir(self, *subdirs: str) -> Path:
        """Create the data dir (and `subdirs` under it) with every missing parent; a path
        that cannot be one fails naming STREAMRAG_DATA_DIR."""
        for path in (self.data_dir, *(self.data_dir / s for s in subdirs)):
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                why = os.strerror(exc.errno) if exc.errno else type(exc).__name__
                msg = (f"STREAMRAG_DATA_DIR={self.data_dir}: cannot create {path.resolve()}: "
                       f"{why}{_culprit(path)}")
                raise ConfigError(msg) from exc
        return self.data_dir


def _culprit(path: Path) -> str:
    """Which part of `path` is in the way: the nearest existing ancestor that is no directory."""
    for parent in (path, *path.parents):
        if parent.exists():
            return "" if parent.is_dir() else f" ({parent.resolve()} is a file, not a directory)"
    return ""


class ServiceSettings(ProcessSettings):
    """Settings every service has: the process's (STREAMRAG_DATA_DIR, STREAMRAG_LOG_LEVEL,
    read under those names whatever the prefix) and its own, under the env prefix each
    subclass sets."""

    model_config = SettingsConfigDict(env_prefix="", frozen=True)

    def listeners(self) -> tuple[Listener, ...]:
        """The ports this service's own servers listen on, besides the process's /metrics
        (shared/worker/metrics.py), which serves its METRICS_PORT if it is the first."""
        return ()

    def env_name(self, field: str) -> str:
        """The environment variable `field` is read from."""
        return env_names(type(self))[field]


class Group(BaseModel):
    """Settings of one concern inside a service's settings (`settings.guard.window_s`),
    frozen like them. The environment names stay flat, STREAMRAG_<SERVICE>_<GROUP>_<FIELD>:
    a class with groups reads them with pydantic-settings' nested delimiter "_", split once
    (`env_nested_delimiter="_", env_nested_max_split=1` in its model_config), and its
    before-validator `fold_groups` takes the same flat names as keyword arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def groups_of(cls: type[BaseModel]) -> dict[str, type[Group]]:
    """{field name: its Group class} of the settings class's grouped fields."""
    return {name: info.annotation for name, info in cls.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, Group)}


def fold_groups(cls: type[BaseModel], data: Any) -> Any:
    """`data` (keyword arguments, or what the sources read) with each flat `<group>_<field>`
    key moved into its group's dict: InferenceSettings(guard_window_s=5) is
    InferenceSettings(guard={"window_s": 5})."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for group, model in groups_of(cls).items():
        flat = {key: out.pop(key) for key in list(out)
                if key.startswith(f"{group}_") and key[len(group) + 1:] in model.model_fields}
        if flat:
            given = out.get(group) or {}
            given = given.model_dump() if isinstance(given, BaseModel) else dict(given)
            out[group] = {**given, **{k[len(group) + 1:]: v for k, v in flat.items()}}
    return out


def env_names(cls: type[BaseSettings]) -> dict[str, str]:
    """Field name -> the environment variable it is read from (its alias, else prefix + name);
    a group's fields as "group.field" -> prefix + group + "_" + field."""
    prefix = cls.model_config.get("env_prefix", "")
    names = {name: info.validation_alias if isinstance(info.validation_alias, str)
             else (prefix + name).upper() for name, info in cls.model_fields.items()}
    for group, model in groups_of(cls).items():
        names.update({f"{group}.{field}": f"{prefix}{group}_{field}".upper()
                      for field in model.model_fields})
    return names


def _settings_classes(base: type[BaseSettings] = BaseSettings) -> Iterator[type[BaseSettings]]:
    for cls in base.__subclasses__():
        yield cls
        yield from _settings_classes(cls)


def named(exc: ValidationError) -> ConfigError | None:
    """A settings class's ValidationError as one ConfigError naming each variable and what
    is wrong with it, never its value (pydantic's own text quotes the input, so logs
    withhold it whole); None when `exc` is not about a settings class."""
    cls = next((c for c in _settings_classes() if c.__name__ == exc.title), None)
    if cls is None:
        return None
    names = env_names(cls)
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = [str(part) for part in error["loc"]]
        field = ".".join(loc[:2]) if len(loc) > 1 and ".".join(loc[:2]) in names else \
            (loc[0] if loc else "")
        where = names.get(field, field.upper())
        parts.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return ConfigError("; ".join(parts))
