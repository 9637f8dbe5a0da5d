"""Loss made visible on the real mesh: a document redaction never handled, whose record on
docs.normalized.v1 its group's committed offset was moved past by hand (redaction frozen
meanwhile), is named by `streamrag audit verify` (which exits 1 with the reason
`lost_inputs`) and by `streamrag trace` ("lost: committed past at redaction"). With the
offset put back and redaction thawed, the same document is audited and verify passes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from services.cli.mesh import Endpoints as RunningMesh
from shared.contract.topics import DOCS_NORMALIZED, REDACTION_APP
from tests.support.mesh import produce, read_topic, streamrag_audit, uid, wait_verified
from tests.support.polling import eventually
from tests.support.workers import alive, pid_of

pytestmark = pytest.mark.integration


def group_state(mesh: RunningMesh) -> str:
    async def go() -> str:
        admin = AIOKafkaAdminClient(bootstrap_servers=mesh.bootstrap)
        await admin.start()
        try:
            return str((await admin.describe_consumer_groups([REDACTION_APP]))[0].groups[0][2])
        finally:
            await admin.close()
    return asyncio.run(go())


def commit(mesh: RunningMesh, partition: int, offset: int | None = None) -> int | None:
    """Commit `offset` for redaction's group on `partition` (of an empty group: nobody else
    holds it), as an operator's tool would; the offset committed before."""
    async def go() -> int | None:
        tp = TopicPartition(DOCS_NORMALIZED.name, partition)
        consumer = AIOKafkaConsumer(bootstrap_servers=mesh.bootstrap, group_id=REDACTION_APP,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([tp])
            before = await consumer.committed(tp)
            if offset is not None:
                await consumer.commit({tp: offset})
            return before
        finally:
            await consumer.stop()
    return asyncio.run(go())


def trace(mesh: RunningMesh, doc_id: str) -> dict[str, Any]:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_MESH_INFERENCE_TARGET": mesh.grpc_target}
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "trace", doc_id, "--json"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_a_record_committed_past_by_hand_is_named_lost_until_it_is_handled(
        mesh: RunningMesh) -> None:
    doc_id = uid("lost")
    pid = pid_of(mesh, "redaction")
    assert alive(pid), "redaction was not running"
    os.killpg(pid, signal.SIGSTOP)  # frozen, not exited: the supervisor leaves it be
    put_back: tuple[int, int] | None = None
    try:
        # Its member times out of the group (the session timeout), which is then empty:
        # the broker takes commits from outside it.
        eventually(lambda: group_state(mesh) == "Empty", "redaction's group to empty", 90)
        produce(mesh, [json.dumps({"id": doc_id, "source": "loss-test",
                                   "text": "Harbour pilots board ships at the outer buoy."}
                                  ).encode()])
        record = eventually(lambda: next((r for r in read_topic(mesh, DOCS_NORMALIZED.name)
                                          if r.key == doc_id.encode()), None),
                            "ingest to pass the document on to docs.normalized.v1", 60)
        before = commit(mesh, record.partition)
        # Put back afterwards: the offset it had, or the start (it had none), either way
        # at or before the record, so redaction handles it after all.
        put_back = (record.partition, 0 if before is None else before)
        assert put_back[1] <= record.offset
        commit(mesh, record.partition, record.offset + 1)  # past it, by hand

        code, report = streamrag_audit(mesh, "verify")
        assert code == 1 and "lost_inputs" in report["reasons"], report
        lost = report["inputs"]["lost"]
        assert {"doc_id": doc_id, "version": 1, "topic": DOCS_NORMALIZED.name,
                "partition": record.partition, "offset": record.offset,
                "group": REDACTION_APP, "committed": record.offset + 1, "why": ""} in lost
        # Only what the hand-made commit passed: records another test had in flight
        # before the freeze, on that partition, at most.
        assert all(g["partition"] == record.partition
                   and put_back[1] <= g["offset"] <= record.offset for g in lost), lost

        [journey] = trace(mesh, doc_id)["journeys"]
        assert (journey["end"], journey["reached"]) == ("lost", DOCS_NORMALIZED.name)
        assert journey["lost"] == {"stage": "redaction", "group": REDACTION_APP,
                                   "topic": DOCS_NORMALIZED.name,
                                   "partition": record.partition, "offset": record.offset,
                                   "committed": record.offset + 1}
        assert journey["reason"].startswith("committed past at redaction")
    finally:
        if put_back is not None:
            commit(mesh, *put_back)
        os.killpg(pid, signal.SIGCONT)

    def audited() -> bool:
        return any(leaf["doc_id"] == doc_id
                   for r in read_topic(mesh, "audit.batches.v1")
                   for leaf in json.loads(r.value)["leaves"])
    eventually(audited, f"{doc_id} in an audit record once redaction is back", 120)
    wait_verified(mesh, "once redaction handled the record", 120)
