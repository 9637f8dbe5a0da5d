"""A backup of a running mesh is a consistent cut: taken while a client produces 5 documents/s
and a burst of documents is still on its way through the stages, restored into a new run
directory and brought up there, it holds every document acknowledged before the backup
began, passes `audit verify`, and every one of those documents answers there exactly once,
but for one forgotten after the backup was taken: its keys are gone, so it never answers.
The mesh it was taken from carries on after each freeze. (A copy of the partitions one
after another while records flow held redacted documents whose raw and normalized inputs
and audit records it lacked: `audit verify` failed for good on it.)

The copy is the state a kill -9 of every process at one instant leaves, so it also finds
the holes of the mesh's crash recovery. It found one: ingest's dedup dropped, as a repeat,
a replayed document whose doc_versions changelog record had reached the broker before its
docs.normalized.v1 record (5 and 22 of a burst of 120 in two of six runs); dedup now sends
such a replay again (services/ingest/dedup.py), and a missing document says whether that is
what happened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from confluent_kafka import KafkaError, Message, Producer

from services.cli.mesh import Endpoints, isolated
from shared.contract.topics import DOC_VERSIONS
from tests.support.mesh import MESH_ENV, chunks_of, read_topic, uid, wait_verified
from tests.support.polling import eventually
from tests.support.steady import SteadyProducer, plain_doc

pytestmark = [pytest.mark.integration, pytest.mark.suite_group("own")]
ROOT = Path(__file__).resolve().parents[2]
ANVIL = ROOT / ".tools/node_modules/.bin/anvil"
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor"]
BURST = 120  # documents acknowledged just before the backup, still in the stages during it
doc = plain_doc(WORDS)


def burst(bootstrap: str, prefix: str) -> list[str]:
    """BURST documents produced at once; the ids the broker acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.append(bytes(msg.key() or b"").decode())
    for n in range(BURST):
        doc_id = f"{prefix}-{n}"
        producer.produce("docs.raw.v1", doc(doc_id, n), key=doc_id.encode(),
                         on_delivery=delivered)
    assert producer.flush(60) == 0
    return acked


def question(doc_id: str) -> str:
    return f"{WORDS[int(doc_id.rsplit('-', 1)[1]) % len(WORDS)]} shipment {doc_id}"


def answering(mesh: Endpoints, ids: list[str], found: set[str]) -> bool:
    """Each of `ids` (`prefix-n`) answers once, at version 1; `found` keeps those that did."""
    for doc_id in ids:
        if doc_id in found:
            continue
        try:
            hits = chunks_of(mesh, question(doc_id), doc_id)
        except grpc.RpcError:  # the worker is restarting
            return False
        if len(hits) > 1 or (hits and hits[0].version != 1):
            raise AssertionError(f"{doc_id} answers {len(hits)} times: {hits}")
        if not hits:
            return False
        found.add(doc_id)
    return True


def cli(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMRAG_MESH_RUN_DIR": str(run_dir)}
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args], env=env,
                          timeout=300, check=False, capture_output=True, text=True)


@pytest.mark.timeout(1200)
def test_a_backup_of_a_running_mesh_restores_to_a_verifiable_mesh(tmp_path: Path) -> None:
    run_dir, copies = tmp_path / "run", [tmp_path / "backup-1", tmp_path / "backup-2"]
    with isolated(run_dir, ANVIL, env=MESH_ENV) as mesh:
        with SteadyProducer(mesh.bootstrap, uid("steady"), doc) as client:
            client.wait_acked(10)
            bursted = burst(mesh.bootstrap, uid("burst"))
            before = [*bursted, *client.acked]  # acknowledged before the backup began
            for copy in copies:  # the second while the mesh catches up after the first
                done = cli(run_dir, "backup", str(copy))
                assert done.returncode == 0, done.stderr
                print(done.stdout)  # the pause and the copy's size and rate, for the log
                assert "the mesh was frozen" in done.stdout, done.stdout
                manifest = json.loads((copy / "manifest.json").read_text())
                assert manifest["frozen_processes"] >= 3 and manifest["bytes"] > 0
            after = len(client.acked)
            client.wait_acked(after + 10)
        assert not client.failed, client.failed[:3]
        found: set[str] = set()
        eventually(lambda: answering(mesh, [*before, *client.acked[after:]], found),
                   "the frozen mesh to carry on: every document answers", 300)
        # Forgotten after the backups were taken: a restore must not bring it back.
        forgotten = bursted[0]
        env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap}
        done = subprocess.run([sys.executable, "-m", "services.cli.main", "forget", forgotten],
                              env=env, timeout=300, check=False, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        eventually(lambda: not chunks_of(mesh, question(forgotten), forgotten),
                   "the forgotten document gone on the mesh it was forgotten on", 120)

    moved = tmp_path / "moved"  # another machine: a run directory of its own
    done = cli(moved, "restore", str(copies[0]))
    assert done.returncode == 0, done.stderr
    assert "links the key store" in done.stdout, done.stdout
    with isolated(moved, ANVIL, env=MESH_ENV) as mesh:
        held = eventually(lambda: keys_of(mesh, "docs.raw.v1") >= set(before) or None,
                          "the copy to hold every document acknowledged before it", 60)
        assert held
        wait_verified(mesh, "on the restored mesh", 180)
        found = set()
        kept = [d for d in before if d != forgotten]
        try:
            eventually(lambda: answering(mesh, kept, found), "every document acknowledged "
                       "before the backup to answer on the restored mesh", 240)
        except AssertionError as exc:
            missing = [d for d in kept if d not in found]
            raise AssertionError(f"{exc}; {len(missing)} missing: {missing[:5]}; "
                                 f"{dedup_signature(mesh, missing)}") from None
        # The backup holds it (snapshot, sealed topics), but its keys are gone: never again.
        assert not chunks_of(mesh, question(forgotten), forgotten)


def keys_of(mesh: Endpoints, topic: str, json_keys: bool = False) -> set[str]:
    """The keys on `topic` (a Faust table's changelog keys are JSON strings)."""
    return {json.loads(r.key) if json_keys else r.key.decode()
            for r in read_topic(mesh, topic) if r.key}


def dedup_signature(mesh: Endpoints, missing: list[str]) -> str:
    """Whether the missing documents were applied by ingest's dedup (its doc_versions
    changelog holds them) and never normalized: the hole a replayed change whose table
    record outran its output used to leave."""
    applied = keys_of(mesh, DOC_VERSIONS.changelog, json_keys=True)
    normalized = keys_of(mesh, "docs.normalized.v1")
    dropped = [d for d in missing if d in applied and d not in normalized]
    return f"{len(dropped)} of them applied by dedup and never normalized: {dropped[:5]}"
