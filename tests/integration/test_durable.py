"""The embedded mesh outlives its processes: a graceful stop and a start on the same run
directory, then kill -9 of every process at once (broker, chain, worker) while a client
keeps producing, then a backup of the running mesh restored into another run directory.
Every document the client saw acknowledged answers, exactly once, at its first version
(and the rows a Debezium truncate deleted stay deleted); the proof given before the
restarts still holds, and `audit verify` passes.

The embedded broker is Apache Kafka with its log under the run directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from services.cli.mesh import Endpoints, isolated
from tests.support.mesh import (
    MESH_ENV,
    chunks_of,
    produce,
    read_topic,
    streamrag_audit,
    uid,
    wait_verified,
)
from tests.support.polling import eventually
from tests.support.steady import SteadyProducer, plain_doc

pytestmark = [pytest.mark.integration, pytest.mark.suite_group("own")]
ROOT = Path(__file__).resolve().parents[2]
ANVIL = ROOT / ".tools/node_modules/.bin/anvil"
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor"]


ENV = {**MESH_ENV, "STREAMRAG_INGEST_APPLY_TRUNCATES": "true"}


def row(table: str, pk: str, body: str) -> bytes:
    return json.dumps({"payload": {"op": "c", "before": None, "ts_ms": 1795947600000,
                                   "source": {"db": "shop", "table": table},
                                   "after": {"id": pk, "body": body}}}).encode()


def deletes_of(mesh: Endpoints, ids: list[str]) -> bool:
    """Each of `ids` has a delete on docs.normalized.v1 (the truncate's, applied)."""
    deleted = {json.loads(r.value)["doc_id"] for r in read_topic(mesh, "docs.normalized.v1")
               if r.key and r.key.decode() in ids and json.loads(r.value)["op"] == "delete"}
    return deleted == set(ids)


doc = plain_doc(WORDS)


def searchable_once(mesh: Endpoints, ids: list[str]) -> bool:
    """Each of `ids` (n-th of its producer's: `uid-n`, or n-th of the list) answers once."""
    for at, doc_id in enumerate(ids):
        tail = doc_id.rsplit("-", 1)[1]
        n = int(tail) if doc_id.count("-") == 2 and tail.isdigit() else at
        try:
            hits = chunks_of(mesh, f"{WORDS[n % len(WORDS)]} shipment {doc_id}", doc_id)
        except grpc.RpcError:  # the worker is restarting
            return False
        if len(hits) != 1 or hits[0].version != 1:
            return False
    return True


def proven(mesh: Endpoints, doc_id: str) -> Any:
    code, proof = streamrag_audit(mesh, "prove", doc_id)
    return proof if code == 0 and all(proof["checks"].values()) else None


@pytest.mark.timeout(900)
def test_restarts_keep_every_document_and_every_proof(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = [uid("kept") for _ in range(6)]
    table = uid("orders").replace("-", "_")
    with isolated(run_dir, ANVIL, env=ENV) as mesh:
        produce(mesh, [doc(d, n) for n, d in enumerate(first)])
        # A Debezium truncate behind two rows of its table (one raw partition: one key).
        produce(mesh, [row(table, "r1", "The quartz invoice was voided."),
                       row(table, "r2", "The quartz refund was issued."),
                       json.dumps({"payload": {"op": "t", "before": None, "after": None,
                                               "ts_ms": 1795947700000,
                                               "source": {"db": "shop", "table": table}}}
                                  ).encode()], key=table.encode())
        eventually(lambda: searchable_once(mesh, first), "the first documents", 180)
        gone = [f"shop.{table}/r1", f"shop.{table}/r2"]
        eventually(lambda: not any(chunks_of(mesh, "quartz invoice refund", d) for d in gone)
                   and deletes_of(mesh, gone) or None, "the truncate to delete its table's rows")
        before = eventually(lambda: proven(mesh, first[0]), "a proof of the first document", 120)

    assert (run_dir / "kafka" / "node-1" / "meta.properties").exists()
    with isolated(run_dir, ANVIL, env=ENV) as mesh:  # new ports, same run directory
        assert searchable_once(mesh, first), "the index answers at once after a restart"
        after = eventually(lambda: proven(mesh, first[0]), "the proof after a restart", 120)
        assert (after["batch_id"], after["root"], after["anchor"]["tx_hash"]) == (
            before["batch_id"], before["root"], before["anchor"]["tx_hash"])

        with SteadyProducer(mesh.bootstrap, uid("steady"), doc) as client:
            client.wait_acked(10)
            pids = {p.stem: int(p.read_text()) for p in (run_dir / "pids").glob("*.pid")}
            assert {"broker", "anvil", "onebox"} <= set(pids)
            for pid in pids.values():  # the client keeps producing through it
                os.kill(pid, signal.SIGKILL)
            client.wait_acked(len(client.acked) + 10, 300)  # and is served again after
        assert not client.failed, client.failed[:3]
        second = client.acked
        eventually(lambda: searchable_once(mesh, first) and searchable_once(mesh, second),
                   "every acknowledged document after kill -9 of every process", 300)
        eventually(lambda: proven(mesh, first[0]), "the proof after kill -9", 120)
        wait_verified(mesh, "after the restarts", 120)
        log = (run_dir / "logs" / "broker.log").read_text(errors="replace")
        assert "killed by SIGKILL; restarting" in log
        copy = tmp_path / "backup"
        assert cli(run_dir, "backup", str(copy)) == 0  # of the running mesh

    moved = tmp_path / "moved"  # another machine: a run directory of its own
    assert cli(moved, "restore", str(copy)) == 0
    with isolated(moved, ANVIL, env=ENV) as mesh:
        assert searchable_once(mesh, first) and searchable_once(mesh, second)
        again = eventually(lambda: proven(mesh, first[0]), "the proof on the moved mesh", 120)
        assert again["root"] == before["root"]
        assert not any(chunks_of(mesh, "quartz invoice refund", d) for d in gone)


def cli(run_dir: Path, *args: str) -> int:
    env = {**os.environ, "STREAMRAG_MESH_RUN_DIR": str(run_dir)}
    return subprocess.run([sys.executable, "-m", "services.cli.main", *args], env=env,
                          timeout=120, check=False).returncode
