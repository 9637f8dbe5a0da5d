"""The embedded mesh: broker, dev chain, topics, and the services' workers.

By default every service runs in one worker process (services/onebox: one runtime, one
model load, one consumer); with `processes` each service is its own process, as in
docker-compose. Every process is supervised (services/cli/supervise.py): one that exits is
restarted with backoff while the rest keep running; only `Mesh.stop` ends them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from services.cli.broker import Node, spawn_node, wait_serving
from services.cli.procs import (
    Child,
    port_open,
    service_argv,
    spawn,
    stop,
    stop_stale,
    wait_port,
)
from services.cli.ready import bearer, wait_ready
from services.cli.settings import MeshSettings, ServiceAccountToken
from services.cli.supervise import Backoff, Supervisor
from shared import logsafe
from shared.contract.topics import SERVICES, TopicSpec
from shared.errors import ConfigError, InfrastructureError
from shared.kafka.admin import contract_specs, ensure_topics
from shared.settings import (
    KafkaSettings,
    LedgerSettings,
    PartitionSettings,
    ProcessSettings,
    env_names,
)

log = logging.getLogger("streamrag.mesh")
# Start order: consumers of later stages first, so nothing waits on a missing reader.
START_ORDER = ("ledger", "retrieval", "embedding", "chunking", "redaction", "ingest", "inference")
assert set(START_ORDER) == set(SERVICES)
ONEBOX = "onebox"  # the one worker's name (log, pid file) in one-process mode
# Stopped last, after every worker: what the others need to the end.
INFRASTRUCTURE = ("broker", "anvil")


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


def spawn_broker(host: str, port: int, run_dir: Path,
                 settings: MeshSettings | None = None) -> Child:
    """The embedded Apache Kafka: one KRaft node, its log under run_dir/kafka, serving."""
    settings = settings or MeshSettings()
    controller = settings.kafka_controller_port or free_port()  # clients never use it
    node = Node(1, host, port, controller, run_dir / "kafka" / "node-1")
    child = spawn_node(node, run_dir, settings.kafka_libs, settings.kafka_heap)
    wait_serving(node.bootstrap, children=[child])
    return child


def native_anvil(anvil: Path) -> Path:
    """The anvil binary itself rather than npm's node launcher, which runs it as a child of
    its own that would outlive a killed `streamrag up` (procs.DIE_WITH_PARENT reaches only
    the process it starts)."""
    found = sorted(anvil.resolve().parent.parent.glob("anvil-*/bin/anvil"))
    return found[0] if found else anvil


class Mesh:
    def __init__(self, mesh: MeshSettings, kafka: KafkaSettings, ledger: LedgerSettings,
                 env: dict[str, str] | None = None) -> None:
        self.settings, self.kafka, self.ledger = mesh, kafka, ledger
        ProcessSettings()  # a retired variable in the environment fails here, not in each child
        # The operator's own paths, addresses and setting names: errors may name them.
        logsafe.allow(*env_names(MeshSettings).values(), mesh.run_dir, mesh.anvil_bin,
                      *kafka.bootstrap.split(","), ledger.rpc_url, mesh.inference_target)
        # extra environment for the services (settings overrides); every process of this
        # machine's mesh shares one data dir under the run dir, where `streamrag status`
        # reads their counters.
        self.env = {"STREAMRAG_DATA_DIR": str(mesh.run_dir / "data"), **(env or {})}
        self.supervisor = Supervisor(Backoff(mesh.restart_initial_s, 2.0, mesh.restart_max_s,
                                             mesh.restart_reset_after_s))
        # Where the bring-up's seconds went: (step, seconds it took), in order (`up` prints
        # it once the mesh is ready).
        self.timeline: list[tuple[str, float]] = []
        self._mark = time.monotonic()

    def _took(self, step: str) -> None:
        now = time.monotonic()
        self.timeline.append((step, now - self._mark))
        self._mark = now

    def topic_specs(self) -> tuple[TopicSpec, ...]:
        """The contract's topics sized as the services will see them: this process's partition
        settings, overridden by the services' own environment (`env`) where it sets them."""
        given: dict[str, Any] = {k.removeprefix("STREAMRAG_KAFKA_").lower(): v
                                 for k, v in self.env.items()
                                 if k.startswith("STREAMRAG_KAFKA_PARTITIONS_")}
        return contract_specs(layout=PartitionSettings(**given))

    @property
    def run_dir(self) -> Path:
        return self.settings.run_dir

    @property
    def children(self) -> list[Child]:
        """The current process of everything this mesh started (restarts included)."""
        return self.supervisor.children()

    def _supervise(self, start: Callable[[], Child]) -> Child:
        child = start()
        self.supervisor.add(child, start)
        return child

    def start_infrastructure(self) -> None:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            msg = (f"STREAMRAG_MESH_RUN_DIR={self.run_dir}: cannot create it: "
                   f"{os.strerror(exc.errno) if exc.errno else type(exc).__name__}")
            raise ConfigError(msg) from exc
        self._mark = time.monotonic()
        stale = stop_stale(self.run_dir)
        if stale:
            log.info("stopped leftovers of an earlier run: %s", ", ".join(stale))
        self._took("an earlier run's processes looked for")
        self._start_broker()
        self._took("Kafka broker (JVM start, KRaft, serving)")
        self._start_chain()
        self._took("Ethereum node (anvil)")
        created = asyncio.run(ensure_topics(self.kafka, self.topic_specs()))
        log.info("topics: %d created, the rest already there", len(created))
        self._took(f"topics checked ({len(created)} created)")
        self.supervisor.start()

    def _start_broker(self) -> None:
        host, port = _host_port(self.kafka.bootstrap.split(",")[0])
        if port_open(host, port) or not self.settings.embedded_broker:
            log.info("using the Kafka broker at %s", self.kafka.bootstrap)
            return

        def start() -> Child:  # its log is on disk: a restart loses nothing acknowledged
            return spawn_broker(host, port, self.run_dir, self.settings)

        self._supervise(start)
        log.info("embedded Apache Kafka (KRaft) on %s:%d, log in %s", host, port,
                 self.run_dir / "kafka")

    def _start_chain(self) -> None:
        rpc = urlparse(self.ledger.rpc_url)
        host, port = rpc.hostname or "127.0.0.1", rpc.port or 8545
        if port_open(host, port) or not self.settings.embedded_chain:
            log.info("using the Ethereum node at %s", self.ledger.rpc_url)
            return
        anvil = self.settings.anvil_bin
        if not anvil.exists():
            msg = (f"STREAMRAG_MESH_ANVIL_BIN={anvil}: no such file (run scripts/up, which "
                   "installs it, or set STREAMRAG_LEDGER_RPC_URL to a running node)")
            raise ConfigError(msg)
        state = (self.run_dir / "chain-state.json").resolve()
        argv = [str(native_anvil(anvil)), "--host", host, "--port", str(port),
                "--state", str(state), "--state-interval", "1", "--silent"]

        def start() -> Child:  # anvil keeps its chain in `state`: a restart loses nothing
            child = spawn("anvil", argv, self.run_dir)
            wait_port(host, port, 30, child, f"STREAMRAG_LEDGER_RPC_URL={self.ledger.rpc_url}")
            return child

        self._supervise(start)
        log.info("Ethereum dev node (anvil) on %s, state in %s", self.ledger.rpc_url, state)

    def start_services(self, names: tuple[str, ...] = START_ORDER) -> None:
        if not self.settings.processes:
            env = {**self.env, "STREAMRAG_ONEBOX_SERVICES": json.dumps(list(names))}
            self._start_worker(ONEBOX, env)
        else:
            for name in names:
                self._start_worker(name, self.env)
        self._took("workers spawned")

    def _start_worker(self, name: str, env: dict[str, str]) -> None:
        child = self._supervise(partial(spawn, name, service_argv(name), self.run_dir, env))
        log.info("started %-10s pid %d, log %s", name, child.popen.pid, child.log_path)

    def probe_token(self) -> str | None:
        """What the bring-up's own calls to inference (readiness, the demo) authenticate
        with: STREAMRAG_MESH_INFERENCE_TOKEN, else the service account's token the services
        are given (this mesh's env, else the environment); None: inference is open."""
        if self.settings.inference_token is not None:
            return self.settings.inference_token.get_secret_value()
        given = self.env.get("STREAMRAG_INFERENCE_AUTH_TOKEN")
        if given is not None:
            return given
        found = ServiceAccountToken().token
        return None if found is None else found.get_secret_value()

    def wait_ready(self) -> None:
        # A worker that exits once is restarted; one that keeps failing will not get ready.
        try:
            wait_ready(self.settings.inference_target, self.settings.ready_timeout_s,
                       self.supervisor.crash_looping, self.run_dir / "logs",
                       bearer(self.probe_token()))
        except RuntimeError as exc:  # crash-looping: say why, from each one's own log
            looping = self.supervisor.crash_looping()
            why = "; ".join(f"{c.name}: {last_error(c)} (log {c.log_path})"
                            for c in self.children if c.name in looping)
            raise InfrastructureError(f"kept exiting, {why}") from exc
        except TimeoutError as exc:
            msg = (f"STREAMRAG_MESH_INFERENCE_TARGET={self.settings.inference_target}: not "
                   f"ready after {self.settings.ready_timeout_s:.0f}s "
                   f"(STREAMRAG_MESH_READY_TIMEOUT_S); logs in {self.run_dir / 'logs'}")
            raise InfrastructureError(msg) from exc
        self._took("workers ready: models loaded, groups joined, every shard answers")

    def timeline_table(self) -> str:
        """The bring-up's steps and their seconds, as a table."""
        width = max((len(step) for step, _ in self.timeline), default=0)
        rows = [f"  {step:<{width}}  {took:6.1f} s" for step, took in self.timeline]
        total = sum(took for _, took in self.timeline)
        return "\n".join(["start-up timeline:", *rows, f"  {'to ready':<{width}}  {total:6.1f} s"])

    def stop(self) -> None:
        """Workers first (their last commits reach the broker), then the broker and chain."""
        self.supervisor.stop()  # first, or it would restart what is being stopped
        children = self.children
        timeout = self.settings.stop_timeout_s
        stop([c for c in children if c.name not in INFRASTRUCTURE], timeout)
        stop([c for c in children if c.name in INFRASTRUCTURE], timeout)


ERROR_LINE = re.compile(r"Error\b|Exception\b|STREAMRAG_")


def last_error(child: Child) -> str:
    """The last error line a crashed worker wrote, else its last line. A worker's log is
    cleaned by its own logsafe (each installs it before logging), so the line carries no
    content a log may not; the broker's and chain's logs are not ours: only named."""
    if child.name in INFRASTRUCTURE:
        return "see its log"
    try:
        lines = [line.strip() for line in child.log_path.read_text(errors="replace")
                 .splitlines() if line.strip() and not line.startswith("--- streamrag:")]
    except OSError:
        return "no log"
    errors = [line for line in lines if ERROR_LINE.search(line)]
    return (errors or lines or ["empty log"])[-1]


LISTEN_PORTS = range(20000, 32768)  # below Linux's default ephemeral range (32768-60999)


def free_port() -> int:
    """A port free now, for a process started later to listen on.

    Picked below the kernel's ephemeral range: a port from bind(0) is one any outgoing
    connection may take in the seconds before its listener starts (CI saw the inference
    metrics port taken so); one below the range is taken only by another listener.
    """
    low = ephemeral_low()
    ports = range(LISTEN_PORTS.start, min(LISTEN_PORTS.stop, low))
    for port in random.sample(ports, min(len(ports), 64)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # a kernel with an unusual range: its own choice
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LISTEN_PORTS.stop


@dataclass(frozen=True)
class Endpoints:
    bootstrap: str
    rpc_url: str
    grpc_target: str
    run_dir: Path
    http_url: str = ""  # inference's HTTP/JSON API ("http://host:port"); "": not served
    mcp_url: str = ""  # inference's MCP endpoint ("http://host:port/mcp"); "": not served


@contextmanager
def isolated(run_dir: Path, anvil_bin: Path, bootstrap: str | None = None,
             env: dict[str, str] | None = None,
             services: tuple[str, ...] = START_ORDER,
             processes: bool = False) -> Iterator[Endpoints]:
    """A whole mesh on free ports with its state under run_dir: for tests and benchmarks
    (`services`: which it runs; a bench may run one of them itself; `processes`: one
    process per service instead of the one-process default)."""
    # The services' Kafka settings in `env` (replication, min.insync ...) hold for the topics
    # this process creates too.
    given: dict[str, Any] = {k.removeprefix("STREAMRAG_KAFKA_").lower(): v
                             for k, v in (env or {}).items() if k.startswith("STREAMRAG_KAFKA_")}
    kafka = KafkaSettings(**{k: v for k, v in given.items() if k in KafkaSettings.model_fields},
                          bootstrap=bootstrap or f"127.0.0.1:{free_port()}")
    ledger = LedgerSettings(rpc_url=f"http://127.0.0.1:{free_port()}")
    grpc_port, http_port, mcp_port = free_port(), free_port(), free_port()
    child_env = {"STREAMRAG_KAFKA_BOOTSTRAP": kafka.bootstrap,
                 "STREAMRAG_LEDGER_RPC_URL": ledger.rpc_url,
                 "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port),
                 "STREAMRAG_INFERENCE_HTTP_PORT": str(http_port),
                 "STREAMRAG_INFERENCE_MCP_PORT": str(mcp_port)}
    # STREAMRAG_MESH_* entries of `env` set the bring-up itself (benchmarks compare them).
    own: dict[str, Any] = {k.removeprefix("STREAMRAG_MESH_").lower(): v
                           for k, v in (env or {}).items() if k.startswith("STREAMRAG_MESH_")}
    settings = MeshSettings(**{**own, "run_dir": run_dir, "anvil_bin": anvil_bin,
                               "processes": processes,
                               "inference_target": f"127.0.0.1:{grpc_port}"})
    mesh = Mesh(settings, kafka, ledger, {**child_env, **(env or {})})
    try:
        mesh.start_infrastructure()
        mesh.start_services(services)
        mesh.wait_ready()
        yield Endpoints(kafka.bootstrap, ledger.rpc_url, settings.inference_target, run_dir,
                        f"http://127.0.0.1:{http_port}", f"http://127.0.0.1:{mcp_port}/mcp")
    finally:
        mesh.stop()
