"""The audit trail on the real broker and chain when things go wrong: every stage from
redaction on (redaction, chunking, embedding, retrieval, ledger) killed with SIGKILL while
documents stream in, forged audit records, and a fresh broker over the same chain.

A lean mesh of its own (broker, anvil, and those five services; documents produced straight
to docs.normalized.v1), so forgeries and kills never touch the session mesh. The audit key is
a test key, configured the way an operator would (not the public dev default).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from eth_account import Account
from pydantic import SecretStr

from services.audit.documents.auditor import chain_reader, load, proof_document
from services.cli.mesh import free_port, spawn_broker
from services.cli.procs import Child, service_argv, spawn, stop
from services.cli.status import stage_counts
from shared.contract.audit_batches import GENESIS_ROOT
from shared.contract.audit_signing import check, sign
from shared.contract.codec import decode
from shared.contract.records import Anchor, AuditBatch, DeadLetter, Document
from shared.contract.topics import (
    AUDIT_BATCHES,
    CHUNKS_EMBEDDED,
    DEADLETTER,
    DOCS_NORMALIZED,
    DOCS_REDACTED,
    LEDGER_ANCHORS,
    SERVICE_INPUTS,
    SERVICES,
    TopicSpec,
)
from shared.kafka.admin import ensure_topics
from shared.kafka.reader import read_back, read_topic
from shared.settings import KafkaSettings, LedgerSettings
from tests.support.anvil import Anvil, needs_anvil, running_anvil
from tests.support.polling import eventually

pytestmark = [
    pytest.mark.suite_group("own"),
    # the kill loop: ~2-4 min of the first test on 2 cores, ~7 min on a loaded machine
    pytest.mark.timeout(900),
    pytest.mark.integration,
    needs_anvil,
]
KEY = "0x" + hashlib.sha256(b"streamrag integration audit key").hexdigest()
SIGNER = Account.from_key(KEY).address
STRANGER_KEY = "0x" + "42" * 32
WARM_UP = 20  # documents through every stage before the kills begin
# Then the stream flows until the last kill is over; slow enough that a loaded machine
# (where kills take longer) still redacts what was produced within the waits below.
PACE_S = 0.4
MAX_DOCS = 1500
# Each stage killed while it is consuming (its committed offsets, or for retrieval its
# processed count, moved); redaction twice,
# the second time after its chain ends were rebuilt once. Downstream first: a stage's
# progress never waits for the restart of one upstream of it, so the kills overlap.
KILLS = ("ledger", "retrieval", "embedding", "chunking", "redaction", "redaction")
STAGES = ("ledger", "redaction", "chunking", "embedding", "retrieval")
TIMEOUT_S = 240.0


def documents(n: int, tag: str = "crash") -> list[Document]:
    return [Document(doc_id=f"{tag}-{i:04d}", version=1, source="crash-test", event_time=0,
                     ingest_time=0, text=f"Ticket {i}: call Maria Lopez on 415-555-01{i % 100:02d}"
                     f" about invoice {1000 + i}.") for i in range(n)]


class MiniMesh:
    """Broker, redaction and ledger as processes, beside a given anvil."""

    def __init__(self, run_dir: Path, rpc_url: str, data_dir: Path,
                 services: tuple[str, ...] = ("ledger", "redaction")) -> None:
        self.run_dir, self.rpc_url, self.services = run_dir, rpc_url, services
        self.bootstrap = f"127.0.0.1:{free_port()}"
        self.kafka = KafkaSettings(bootstrap=self.bootstrap)
        # Redaction's chain ends and the ledger's contract record outlive this mesh (the
        # data_dir fixture); the other stages keep state under this run only.
        self.data_dirs = {"redaction": data_dir, "ledger": data_dir}
        self.env = {"STREAMRAG_KAFKA_BOOTSTRAP": self.bootstrap,
                    "STREAMRAG_LEDGER_RPC_URL": rpc_url,
                    "STREAMRAG_DATA_DIR": str(run_dir / "data"),
                    # Redaction's data keys outlive the mesh with its chain ends.
                    "STREAMRAG_KEYS_PATH": str(data_dir / "keys" / "versions.sqlite"),
                    "STREAMRAG_REDACTION_AUDIT_SIGNING_KEY": KEY,
                    "STREAMRAG_AUDIT_SIGNERS": json.dumps([SIGNER])}
        self.children: dict[str, Child] = {}
        self.killed: list[tuple[str, int, bool]] = []  # (service, returncode, mid-stream)
        self.produced: list[str] = []  # doc ids, in the order produced

    def start(self) -> None:
        port = int(self.bootstrap.rsplit(":", 1)[1])
        self.children["broker"] = spawn_broker("127.0.0.1", port, self.run_dir)
        asyncio.run(ensure_topics(self.kafka))
        for name in self.services:
            self.start_service(name)

    def start_service(self, name: str) -> None:
        data_dir = self.data_dirs.get(name, self.run_dir / "data")
        self.children[name] = spawn(name, service_argv(name), self.run_dir,
                                    {**self.env, "STREAMRAG_DATA_DIR": str(data_dir)})

    def kill(self, name: str, mid_stream: bool = False) -> None:
        child = self.children.pop(name)
        os.killpg(child.popen.pid, signal.SIGKILL)
        self.killed.append((name, child.popen.wait(30), mid_stream))

    def progress(self, service: str) -> int:
        """A number that grows while `service` consumes: its group's committed offsets, or
        for retrieval (whose shards keep their own positions and commit nothing) the
        records its index agent processed, as its boundary counters say."""
        if service != "retrieval":
            return self.committed(service)
        return int(stage_counts(self.run_dir / "data").get("retrieval", {})
                   .get("processed", 0))

    def committed(self, service: str) -> int:
        """How far the service's consumer group has committed, over all its inputs."""
        async def go() -> int:
            tps = [TopicPartition(t.name, p) for t in SERVICE_INPUTS[service]
                   for p in range(t.partitions)]
            reader = AIOKafkaConsumer(bootstrap_servers=self.bootstrap,
                                      group_id=SERVICES[service], enable_auto_commit=False)
            await reader.start()
            try:
                return sum([await reader.committed(tp) or 0 for tp in tps])
            finally:
                await reader.stop()
        return asyncio.run(go())

    def count(self, spec: TopicSpec) -> int:
        """How many records `spec` holds."""
        return len(self.read(spec))

    def stop(self) -> None:
        stop(list(self.children.values()), 15)
        self.children.clear()

    def read(self, spec: Any) -> list[Any]:
        return asyncio.run(read_topic(self.kafka, spec))

    def produce(self, topic: str, pairs: list[tuple[bytes, bytes]], pace_s: float = 0) -> None:
        async def go() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
            await producer.start()
            try:
                for key, value in pairs:
                    await producer.send(topic, value, key=key)
                    await asyncio.sleep(pace_s)
                await producer.flush()
            finally:
                await producer.stop()
        asyncio.run(go())

    def redacted_ids(self) -> set[str]:
        return {json.loads(r.value)["doc_id"] for r in self.read(DOCS_REDACTED)}

    def all_anchored(self, ids: set[str]) -> bool:
        return not self.unanchored(ids)

    def unanchored(self, ids: set[str]) -> dict[str, Any]:
        """What keeps `ids` from being anchored: documents in no audit record, and batches
        with no announcement on ledger.anchors.v1 (with what the chain holds for them)."""
        batches = [decode(AuditBatch, r.value) for r in self.read(AUDIT_BATCHES)]
        mine = {b.batch_id for b in batches if {x.doc_id for x in b.leaves} & ids}
        covered = {x.doc_id for b in batches if b.batch_id in mine for x in b.leaves}
        anchors = [decode(Anchor, r.value) for r in self.read(LEDGER_ANCHORS)]
        done = {a.batch_id for a in anchors}
        out: dict[str, Any] = {}
        if ids - covered:
            redacted = [json.loads(r.value) for r in self.read(DOCS_REDACTED)]
            out["in_no_record"] = {d["doc_id"]: d["batch_id"] for d in redacted
                                   if d["doc_id"] in ids - covered}
        if mine - done:
            on_chain = chain_reader(LedgerSettings(rpc_url=self.rpc_url), anchors)
            out["unannounced"] = {b: on_chain(b) for b in sorted(mine - done)}
        return out

    def audit(self, *args: str) -> tuple[int, Any]:
        # The CLI finds the ledger's contract record under the ledger's data dir.
        env = {**os.environ, **self.env, "STREAMRAG_DATA_DIR": str(self.data_dirs["ledger"])}
        done = subprocess.run([sys.executable, "-m", "services.cli.main", "audit", *args,
                               "--json"], capture_output=True, text=True, env=env, timeout=120,
                              check=False)
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def wait_for(check: Any, what: str) -> Any:
    return eventually(check, what, TIMEOUT_S)


@pytest.fixture(scope="module")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anvil]:
    with running_anvil(tmp_path_factory.mktemp("audit-anvil")) as node:
        yield node


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Kept across broker incarnations, like .run/data: the ledger reuses its contract."""
    return tmp_path_factory.mktemp("audit-data")


class Stream(threading.Thread):
    """Documents produced one every PACE_S until stopped (at most MAX_DOCS)."""

    def __init__(self, mesh: MiniMesh) -> None:
        super().__init__(daemon=True)
        self.mesh, self.stopping, self.docs = mesh, threading.Event(), documents(MAX_DOCS)
        self.sent = 0

    def run(self) -> None:
        async def go() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=self.mesh.bootstrap, linger_ms=5)
            await producer.start()
            try:
                for doc in self.docs[WARM_UP:]:
                    if self.stopping.is_set():
                        break
                    await producer.send_and_wait(DOCS_NORMALIZED.name,
                                                 doc.model_dump_json().encode(),
                                                 key=doc.doc_id.encode())
                    self.sent += 1
                    await asyncio.sleep(PACE_S)
            finally:
                await producer.stop()
        asyncio.run(go())


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory, anvil: Anvil,
            data_dir: Path) -> Iterator[MiniMesh]:
    """A stream during which every stage from redaction on is killed with SIGKILL while it
    is consuming, and restarted; redaction twice."""
    mesh = MiniMesh(tmp_path_factory.mktemp("audit-mesh"), anvil.url, data_dir, STAGES)
    mesh.start()
    stream = Stream(mesh)
    try:
        warm = stream.docs[:WARM_UP]
        mesh.produce(DOCS_NORMALIZED.name, [(d.doc_id.encode(), d.model_dump_json().encode())
                                            for d in warm])
        wait_for(lambda: mesh.count(CHUNKS_EMBEDDED) >= WARM_UP, "the warm-up embedded")
        stream.start()
        for name in KILLS:
            before = mesh.progress(name)
            wait_for(lambda n=name, b=before: mesh.progress(n) > b,
                     f"{name} to consume")  # then kill wherever its batch happens to be
            mesh.kill(name, mid_stream=stream.is_alive())
            mesh.start_service(name)
        stream.stopping.set()  # the restarted redaction works off what is left
        stream.join()
        mesh.produced = [d.doc_id for d in stream.docs[:WARM_UP + stream.sent]]
        ids = set(mesh.produced)
        # The work left after the last kill grows with how long the kills took: so does the
        # wait (about 2 documents/s is what redaction manages on a loaded 2-core machine).
        drain_s = TIMEOUT_S + 0.5 * len(ids)
        eventually(lambda: ids <= mesh.redacted_ids(), "every document redacted", drain_s)
        try:
            eventually(lambda: mesh.all_anchored(ids), "every batch anchored", drain_s)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {mesh.unanchored(ids)}") from None
        yield mesh
    finally:
        stream.stopping.set()
        mesh.stop()


def test_verify_is_clean_after_every_stage_is_killed_mid_stream(crashed: MiniMesh) -> None:
    assert [(name, code) for name, code, _ in crashed.killed] == [
        (name, -signal.SIGKILL) for name in KILLS]
    assert all(mid for _, _, mid in crashed.killed)  # the stream was flowing at every kill
    code, report = crashed.audit("verify")
    assert code == 0, report
    assert report["ok"] and not report["orphans"] and not report["unreadable"]
    # Every document is in exactly one batch: a redelivery formed no second batch.
    batches = [decode(AuditBatch, r.value) for r in crashed.read(AUDIT_BATCHES)]
    leaves = [x.doc_id for b in {b.batch_id: b for b in batches}.values() for x in b.leaves]
    assert sorted(leaves) == sorted(crashed.produced)
    assert {b.signer for b in batches} == {SIGNER}
    # Each restarted worker went on from its partitions' chain ends (read back from the
    # topic) instead of starting a chain again: one chain start per partition.
    starts = Counter(b.partition for b in {b.batch_id: b for b in batches}.values()
                     if b.prev_root == GENESIS_ROOT)
    assert starts and set(starts.values()) == {1}, starts


def test_every_document_is_provable_after_the_kills(crashed: MiniMesh) -> None:
    """What `streamrag audit prove` checks, for every document of the stream at once."""
    data = load(crashed.kafka)
    on_chain = chain_reader(LedgerSettings(rpc_url=crashed.rpc_url), data.anchors)
    recorded = {b.batch_id: b for b in data.batches if check(b, {SIGNER.lower()}) is None}
    failed: dict[str, dict[str, bool]] = {}
    proven = set()
    for doc in data.docs:
        if doc.doc_id in proven or doc.batch_id not in recorded:
            continue  # a second copy, or a copy from a batch cut short by a kill
        out = proof_document(doc, recorded[doc.batch_id], data.anchors, on_chain,
                             frozenset({SIGNER.lower()}))
        proven.add(doc.doc_id)
        if not all(out["checks"].values()):
            failed[doc.doc_id] = out["checks"]
    assert not failed
    assert proven == set(crashed.produced)
    code, proof = crashed.audit("prove", crashed.produced[-1])  # and through the CLI
    assert code == 0 and all(proof["checks"].values()), proof


def test_chain_ends_are_read_back_from_the_tail_of_the_audit_topic(crashed: MiniMesh) -> None:
    """What a restarted redaction reads: the newest records, not the whole history."""
    everything = crashed.read(AUDIT_BATCHES)
    newest = {p: max(r.offset for r in everything if r.partition == p)
              for p in {r.partition for r in everything}}

    def read(enough: Any) -> list[Any]:
        return asyncio.run(read_back(crashed.kafka, AUDIT_BATCHES, enough, tail=2))
    tail = read(lambda records: True)
    assert 0 < len(tail) < len(everything)
    assert {r.partition: r.offset for r in tail} == newest  # each partition's last record
    assert [(r.partition, r.offset) for r in read(lambda records: False)] == \
        [(r.partition, r.offset) for r in everything]  # never enough: the whole topic


def test_forged_records_are_refused_by_the_ledger_and_named_by_verify(
        crashed: MiniMesh) -> None:
    real = decode(AuditBatch, crashed.read(AUDIT_BATCHES)[0].value)
    invented = real.model_copy(update={
        "batch_id": f"{real.epoch}/docs.normalized.v1/{real.partition}/90000-90001",
        "first_offset": 90000, "last_offset": 90001, "signer": "", "signature": ""})
    reused = sign(real.model_copy(update={"root": "ab" * 32}), SecretStr(STRANGER_KEY))
    crashed.produce(AUDIT_BATCHES.name, [(b"0", invented.model_dump_json().encode()),
                                         (b"0", reused.model_dump_json().encode())])

    def ledger_letters() -> list[tuple[str, str | None]]:
        letters = [decode(DeadLetter, r.value) for r in crashed.read(DEADLETTER)]
        return sorted((x.reason, x.field) for x in letters if x.stage == "ledger") or []
    assert wait_for(lambda: len(ledger_letters()) >= 2 and ledger_letters(),
                    "the ledger to dead-letter both") == [
        ("bad_signature", "signature"), ("unknown_signer", "signer")]

    code, report = crashed.audit("verify")
    assert code == 1 and not report["ok"]
    found = {b["batch_id"]: b["problems"] for b in report["batches"] if b["problems"]}
    assert set(found) == {invented.batch_id, real.batch_id}
    assert found[invented.batch_id][0] == "unsigned record"
    assert "missing anchor" in found[invented.batch_id]  # the ledger did not anchor it
    assert found[real.batch_id] == [
        "conflicting record for this batch id: differs in root, signer; "
        f"unknown signer {reused.signer}"]


def test_a_fresh_broker_over_the_same_chain_verifies_and_proves(
        crashed: MiniMesh, tmp_path_factory: pytest.TempPathFactory, anvil: Anvil,
        data_dir: Path) -> None:
    """The embedded mesh again in a new run dir: its broker starts empty (a new log
    directory), the chain keeps its anchors.
    The same documents land on the same offsets; the epoch keeps their batch ids new. The
    new batches verify and prove; every batch of the first run is on chain with its
    evidence gone, so verify names each one unprovable (by its key) and fails."""
    before = {b.batch_id: b.epoch for b in (decode(AuditBatch, r.value)
                                            for r in crashed.read(AUDIT_BATCHES))}
    crashed.stop()
    again = MiniMesh(tmp_path_factory.mktemp("audit-mesh-again"), anvil.url, data_dir)
    again.start()
    try:
        docs = documents(24)  # the first documents of the earlier run, byte for byte
        again.produce("docs.normalized.v1", [(d.doc_id.encode(), d.model_dump_json().encode())
                                             for d in docs])
        ids = {d.doc_id for d in docs}
        wait_for(lambda: again.all_anchored(ids), "the new batches anchored")
        code, report = again.audit("verify")
        assert code == 1 and all(b["result"] == "ok" for b in report["batches"]), report
        earlier = {f"(unknown: key {hashlib.sha256(i.encode()).hexdigest()})" for i in before}
        unprovable = {u["batch_id"] for u in report["unprovable"]}
        assert unprovable and unprovable <= earlier, report["unprovable"]
        assert {u["missing"] for u in report["unprovable"]} == {
            "no audit record on audit.batches.v1"}
        assert report["chain"]["anchors"] == len(report["batches"]) + len(unprovable)
        now = {b.batch_id: b.epoch for b in (decode(AuditBatch, r.value)
                                             for r in again.read(AUDIT_BATCHES))}
        assert now and not set(now.values()) & set(before.values())  # a new epoch
        assert not set(now) & set(before)  # so no batch id of the chain's history again
        code, proof = again.audit("prove", docs[5].doc_id)
        assert code == 0 and all(proof["checks"].values()), proof
        assert proof["signer"] == SIGNER and proof["on_chain"]["signer"] == SIGNER
    finally:
        again.stop()
