"""Settings of the embedded bring-up (env prefix STREAMRAG_MESH_)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class MeshSettings(BaseSettings):
    """The embedded bring-up of `streamrag up`: run dir, embedded broker and chain, supervision."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_MESH_", frozen=True)

    # Where the embedded bring-up keeps its state: the services' STREAMRAG_DATA_DIR
    # (run_dir/data), the embedded Kafka's log (run_dir/kafka) and the dev chain's state.
    run_dir: Path = Path(".run")
    # The anvil binary that runs the embedded dev chain.
    anvil_bin: Path = Path(".tools/node_modules/.bin/anvil")
    # Start the embedded broker unless something already answers at the bootstrap address.
    embedded_broker: bool = True
    # Apache Kafka's jars for the embedded broker (scripts/install fetches them).
    kafka_libs: Path = Path(".tools/kafka/libs")
    # The embedded broker's JVM heap (-Xmx).
    kafka_heap: str = Field(default="512m", pattern=r"^[0-9]+[mg]$")
    # The embedded broker's KRaft controller port on the bootstrap host (only the broker
    # itself uses it); 0: a free port at each start.
    kafka_controller_port: int = Field(default=0, ge=0, le=65535)
    # Start the embedded dev chain unless something already answers at the ledger's RPC URL.
    embedded_chain: bool = True
    # One process per service as docker-compose runs them (`streamrag up --processes`)
    # instead of every service's agents in one worker process (the default).
    processes: bool = False
    # The inference gRPC address the CLI's query commands and readiness check use.
    inference_target: str = "127.0.0.1:50051"
    # The port `streamrag up` has inference serve its HTTP/JSON API on (it passes it to the
    # services as STREAMRAG_INFERENCE_HTTP_PORT, whose own default is 0, off); 0: not served.
    inference_http_port: int = Field(default=8080, ge=0, le=65535)
    # The port `streamrag up` has inference serve MCP on (streamable HTTP at /mcp; passed as
    # STREAMRAG_INFERENCE_MCP_PORT, whose own default is 0, off); 0: not served.
    inference_mcp_port: int = Field(default=8090, ge=0, le=65535)
    # The bearer token `streamrag query` and `streamrag mcp` send (a user's JWT or the
    # service account's token) where the API has auth configured; unset: none is sent.
    inference_token: SecretStr | None = None
    # How long `streamrag up` waits for every service to be ready before giving up.
    ready_timeout_s: float = Field(default=300.0, gt=0)
    # How long a stopping process is given before it is killed.
    stop_timeout_s: float = Field(default=15.0, gt=0)
    # The first wait before restarting a process that exited; it doubles up to restart_max_s.
    restart_initial_s: float = Field(default=1.0, gt=0)
    # The longest wait before restarting a process that keeps exiting.
    restart_max_s: float = Field(default=30.0, gt=0)
    # A process that ran this long before exiting starts the restart count over.
    restart_reset_after_s: float = Field(default=60.0, gt=0)


class ServiceAccountToken(BaseSettings):
    """Inference's service-account token as the bring-up sees it: what its own probes send
    when STREAMRAG_MESH_INFERENCE_TOKEN is unset (the variable is inference's, listed with
    inference's settings; one value, two readers)."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore")

    # STREAMRAG_INFERENCE_AUTH_TOKEN, the token `streamrag up` gives inference.
    token: SecretStr | None = Field(default=None,
                                    validation_alias="STREAMRAG_INFERENCE_AUTH_TOKEN")
