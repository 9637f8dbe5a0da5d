"""The audit trail on the real broker and chain when things go wrong: redaction killed with
SIGKILL mid-stream, forged audit records, and a fresh broker over the same chain.

A lean mesh of its own (broker, anvil, redaction, ledger; documents produced straight to
docs.normalized.v1), so forgeries and kills never touch the session mesh. The audit key is
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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from eth_account import Account
from pydantic import SecretStr

from services.redaction.reader import read_topic
from shared.admin import ensure_topics
from shared.audit_signing import sign
from shared.cli.mesh import free_port, spawn_broker
from shared.cli.procs import Child, service_argv, spawn, stop
from shared.codec import decode
from shared.records import AuditBatch, DeadLetter, Document
from shared.settings import KafkaSettings
from shared.topics import AUDIT_BATCHES, DEADLETTER, DOCS_REDACTED, LEDGER_ANCHORS
from tests.integration.test_ledger_anvil import ANVIL, Anvil

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(ANVIL).exists(), reason="anvil not installed"),
]
KEY = "0x" + hashlib.sha256(b"streamrag integration audit key").hexdigest()
SIGNER = Account.from_key(KEY).address
STRANGER_KEY = "0x" + "42" * 32
DOCS = 360
TIMEOUT_S = 240.0


def documents(n: int, tag: str = "crash") -> list[Document]:
    return [Document(doc_id=f"{tag}-{i:04d}", version=1, source="crash-test", event_time=0,
                     ingest_time=0, text=f"Ticket {i}: call Maria Lopez on 415-555-01{i % 100:02d}"
                     f" about invoice {1000 + i}.") for i in range(n)]


class MiniMesh:
    """Broker, redaction and ledger as processes, beside a given anvil."""

    def __init__(self, run_dir: Path, rpc_url: str, data_dir: Path) -> None:
        self.run_dir, self.rpc_url = run_dir, rpc_url
        self.bootstrap = f"127.0.0.1:{free_port()}"
        self.env = {"STREAMRAG_KAFKA_BOOTSTRAP": self.bootstrap,
                    "STREAMRAG_LEDGER_RPC_URL": rpc_url,
                    "STREAMRAG_REDACTION_DATA_DIR": str(data_dir),
                    "STREAMRAG_LEDGERSVC_DATA_DIR": str(data_dir),
                    "STREAMRAG_REDACTION_AUDIT_SIGNING_KEY": KEY,
                    "STREAMRAG_AUDIT_SIGNERS": json.dumps([SIGNER])}
        self.children: dict[str, Child] = {}
        self.kills_mid_stream = 0

    def start(self) -> None:
        port = int(self.bootstrap.rsplit(":", 1)[1])
        self.children["broker"] = spawn_broker("127.0.0.1", port, self.run_dir)
        asyncio.run(ensure_topics(KafkaSettings(bootstrap=self.bootstrap)))
        for name in ("ledger", "redaction"):
            self.start_service(name)

    def start_service(self, name: str) -> None:
        self.children[name] = spawn(name, service_argv(name), self.run_dir, self.env)

    def kill(self, name: str) -> None:
        child = self.children.pop(name)
        os.killpg(child.popen.pid, signal.SIGKILL)
        child.popen.wait(30)

    def stop(self) -> None:
        stop(list(self.children.values()), 15)
        self.children.clear()

    def read(self, spec: Any) -> list[Any]:
        return asyncio.run(read_topic(self.bootstrap, spec, 0.3))

    def produce(self, topic: str, pairs: list[tuple[bytes, bytes]]) -> None:
        async def go() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
            await producer.start()
            try:
                for key, value in pairs:
                    await producer.send(topic, value, key=key)
                await producer.flush()
            finally:
                await producer.stop()
        asyncio.run(go())

    def redacted_ids(self) -> set[str]:
        return {json.loads(r.value)["doc_id"] for r in self.read(DOCS_REDACTED)}

    def all_anchored(self, ids: set[str]) -> bool:
        batches = [decode(AuditBatch, r.value) for r in self.read(AUDIT_BATCHES)]
        mine = {b.batch_id for b in batches if {x.doc_id for x in b.leaves} & ids}
        covered = {x.doc_id for b in batches if b.batch_id in mine for x in b.leaves}
        done = {json.loads(r.value)["batch_id"] for r in self.read(LEDGER_ANCHORS)}
        return ids <= covered and mine <= done

    def audit(self, *args: str) -> tuple[int, Any]:
        env = {**os.environ, **self.env}
        done = subprocess.run([sys.executable, "-m", "shared.cli.main", "audit", *args,
                               "--json"], capture_output=True, text=True, env=env, timeout=120,
                              check=False)
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def wait_for(check: Any, what: str, timeout_s: float = TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anvil]:
    tmp = tmp_path_factory.mktemp("audit-anvil")
    node = Anvil(free_port(), tmp / "state.json", tmp / "anvil.log")
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Kept across broker incarnations, like .run/data: the ledger reuses its contract."""
    return tmp_path_factory.mktemp("audit-data")


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory, anvil: Anvil,
            data_dir: Path) -> Iterator[MiniMesh]:
    """A stream during which redaction is killed with SIGKILL twice and restarted."""
    mesh = MiniMesh(tmp_path_factory.mktemp("audit-mesh"), anvil.url, data_dir)
    mesh.start()
    try:
        docs = documents(DOCS)
        phases = [docs[:DOCS // 3], docs[DOCS // 3:2 * DOCS // 3], docs[2 * DOCS // 3:]]
        for phase, last in zip(phases, (False, False, True), strict=True):
            before = len(mesh.redacted_ids())
            mesh.produce("docs.normalized.v1", [(d.doc_id.encode(),
                                                 d.model_dump_json().encode()) for d in phase])
            if last:
                break
            # Kill once this worker is busy with the phase: wherever a batch happens to be.
            seen = wait_for(lambda b=before: (n := len(mesh.redacted_ids())) >= b + 12 and n,
                            "the worker to get going")
            mesh.kill("redaction")
            mesh.kills_mid_stream += seen < before + len(phase)
            mesh.start_service("redaction")
        ids = {d.doc_id for d in docs}
        wait_for(lambda: ids <= mesh.redacted_ids(), "every document redacted")
        wait_for(lambda: mesh.all_anchored(ids), "every batch anchored")
        yield mesh
    finally:
        mesh.stop()


def test_verify_is_clean_after_redaction_is_killed_mid_stream(crashed: MiniMesh) -> None:
    code, report = crashed.audit("verify")
    assert code == 0, report
    assert report["ok"] and not report["orphans"] and not report["unreadable"]
    # Every document is in exactly one batch: a redelivery formed no second batch.
    batches = [decode(AuditBatch, r.value) for r in crashed.read(AUDIT_BATCHES)]
    leaves = [x.doc_id for b in {b.batch_id: b for b in batches}.values() for x in b.leaves]
    assert sorted(leaves) == sorted(d.doc_id for d in documents(DOCS))
    assert {b.signer for b in batches} == {SIGNER}
    assert crashed.kills_mid_stream >= 1  # not all of a phase was redacted at the kill
    log = (crashed.run_dir / "logs" / "redaction.log").read_text()
    assert log.count("chain ends reloaded") >= 3  # once per worker: rebuilt from the topic


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
    """Re-running the embedded mesh: the broker starts empty, the chain keeps its anchors.
    The same documents land on the same offsets; the epoch keeps their batch ids new."""
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
        assert code == 0, report
        code, proof = again.audit("prove", docs[5].doc_id)
        assert code == 0 and all(proof["checks"].values()), proof
        assert proof["signer"] == SIGNER and proof["on_chain"]["signer"] == SIGNER
    finally:
        again.stop()
