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
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from eth_account import Account
from pydantic import SecretStr

from services.redaction.reader import read_back, read_topic
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
DOCS = 300
PACE_S = 0.2  # the stream lasts ~60 s: through both kills and restarts (~20-40 s each)
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
        return asyncio.run(read_topic(KafkaSettings(bootstrap=self.bootstrap), spec, 0.3))

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

    def redacted_so_far(self) -> int:
        """How many redacted records there are now, without waiting for the topic to go
        quiet (it does not while the stream flows)."""
        async def go() -> int:
            consumer = AIOKafkaConsumer(DOCS_REDACTED.name, bootstrap_servers=self.bootstrap,
                                        group_id=None, auto_offset_reset="earliest",
                                        fetch_max_wait_ms=10)
            await consumer.start()
            try:
                seen, deadline = 0, time.monotonic() + 2
                while time.monotonic() < deadline:
                    got = await consumer.getmany(timeout_ms=200)
                    if not got:
                        break
                    seen += sum(len(r) for r in got.values())
                return seen
            finally:
                await consumer.stop()
        return asyncio.run(go())

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
        # A stream that outlasts both kills and restarts (a restart takes ~20 s here).
        stream = threading.Thread(target=mesh.produce, args=(
            "docs.normalized.v1", [(d.doc_id.encode(), d.model_dump_json().encode())
                                   for d in docs], PACE_S))
        stream.start()
        for _ in range(2):
            before = mesh.redacted_so_far()
            wait_for(lambda b=before: mesh.redacted_so_far() >= b + 12,
                     "the worker to get going")  # then kill wherever a batch happens to be
            mesh.kill("redaction")
            mesh.kills_mid_stream += stream.is_alive()
            mesh.start_service("redaction")
        stream.join()
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
    assert crashed.kills_mid_stream >= 1  # the stream was still flowing at a kill
    log = (crashed.run_dir / "logs" / "redaction.log").read_text()
    # Each worker that got records rebuilt its chain ends from the topic (the last one may
    # still be starting: the others had done all the work).
    assert log.count("chain ends reloaded") >= 2


def test_chain_ends_are_read_back_from_the_tail_of_the_audit_topic(crashed: MiniMesh) -> None:
    """What a restarted redaction reads: the newest records, not the whole history."""
    everything = crashed.read(AUDIT_BATCHES)
    newest = {p: max(r.offset for r in everything if r.partition == p)
              for p in {r.partition for r in everything}}

    def read(enough: Any) -> list[Any]:
        return asyncio.run(read_back(KafkaSettings(bootstrap=crashed.bootstrap), AUDIT_BATCHES, 0.3,
                                enough, tail=2))
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
