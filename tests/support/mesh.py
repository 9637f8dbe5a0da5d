"""The mesh seen from outside, the way a user reaches it: a plain Kafka producer and
consumer (aiokafka, no project code on the way in) and the gRPC API."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.cli.mesh import Endpoints
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc

# Small limit so the oversize case needs no megabyte payloads.
MESH_ENV = {"STREAMRAG_INGEST_MAX_PAYLOAD_BYTES": "65536"}
# The session meshes answer by quoting, as their tests assert; the bundled generator runs in
# its own worker beside them (tests/integration/test_real_generator.py).
MESH_ENV["STREAMRAG_INFERENCE_GENERATOR_BUNDLED"] = "false"
# The default CDC mapping, plus a table whose extra columns become metadata, so the
# planted-PII scan (test_pii_planted.py) covers CDC metadata fields too.
MESH_ENV["STREAMRAG_INGEST_CDC_MAPPINGS"] = json.dumps({
    "*": {"id": "id", "text": "body", "title": "title", "default_domain": "database"},
    "helpdesk.pii_contacts": {"id": "id", "text": "body", "title": "title",
                              "default_domain": "database",
                              "metadata": {"owner": "owner_email", "phone": "owner_phone"}}})

# Drift windows of seconds, not minutes, judged after two of them, so that
# tests/integration/test_drift.py sees a switch within its time budget.
MESH_ENV.update({"STREAMRAG_RETRIEVAL_DRIFT_WINDOW_S": "3",
                 "STREAMRAG_RETRIEVAL_DRIFT_GRACE_S": "3",
                 "STREAMRAG_RETRIEVAL_DRIFT_MIN_DOCS": "4",
                 "STREAMRAG_RETRIEVAL_DRIFT_MIN_HISTORY": "2"})

# The SLO guard on the multi-process session mesh only (the one-process mesh's tests count
# its local searches, which probes would add to): windows of 2 s, acting after 2 breaking
# ones, a probe set of three documents tests/integration/test_slo_guard.py produces, and
# p99 judged against 3 s from 5 calls a window (tests/integration/
# test_slo_guard_fail_safe.py). A slow call in another test rolls nothing back: only the
# guard tests ship variants, and the main variant ("base" without them) is only reported.
GUARD_WORDS = ("amberquill", "basaltwick", "cobaltfern")
GUARD_PROBES = [{"question": f"where does the zorbulant kelpfinch {w} nest",
                 "doc_id": f"guard-probe-{w}"} for w in GUARD_WORDS]
GUARD_P99_MS = 3000.0
GUARD_ENV = {"STREAMRAG_INFERENCE_GUARD_WINDOW_S": "2", "STREAMRAG_INFERENCE_GUARD_WINDOWS": "2",
             "STREAMRAG_INFERENCE_GUARD_GRACE_S": "2",
             "STREAMRAG_INFERENCE_GUARD_P99_MS": str(GUARD_P99_MS),
             "STREAMRAG_INFERENCE_GUARD_MIN_CALLS": "5",
             "STREAMRAG_INFERENCE_GUARD_PROBES": json.dumps(GUARD_PROBES)}
FAULTS = Path(__file__).resolve().parent / "faults"  # a test-only sitecustomize


def fault_env(delays: Path) -> dict[str, str]:
    """What a mesh needs for the test-only inference delays (tests/support/faults): the
    file of {variant: seconds} a test writes while it runs."""
    return {"PYTHONPATH": os.pathsep.join([str(FAULTS), str(FAULTS.parents[2])]),
            "STREAMRAG_TEST_DELAY_FILE": str(delays)}


def uid(prefix: str) -> str:
    """A fresh id, so tests sharing one mesh never see each other's documents."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(mesh: Endpoints, values: list[bytes], headers: list[tuple[str, bytes]] | None = None,
            key: bytes | None = None) -> None:
    """Produce to docs.raw.v1 with a plain aiokafka producer."""
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait("docs.raw.v1", value, key=key, headers=headers)
        finally:
            await producer.stop()
    asyncio.run(go())


def query(mesh: Endpoints, question: str, **kw: Any) -> inference_pb2.QueryResponse:
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        return stub.Query(inference_pb2.QueryRequest(question=question, **kw), timeout=15)


def chunks_of(mesh: Endpoints, question: str, doc_id: str, **kw: Any) -> list[Any]:
    """The citations of `doc_id` among the top 50 for `question`."""
    resp = query(mesh, question, top_k=50, **kw)
    return [c for c in resp.citations if c.doc_id == doc_id]


def read_topic(mesh: Endpoints, topic: str, timeout_s: float = 3.0) -> list[Any]:
    """Every record on `topic` from the start that arrives within `timeout_s`.

    A snapshot, not a wait: poll it with `eventually` for records that are still coming."""
    async def go() -> list[Any]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=mesh.bootstrap,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=10,
                                    group_id=None)
        await consumer.start()
        out: list[Any] = []
        try:
            end = time.monotonic() + timeout_s
            while time.monotonic() < end:
                batch = await consumer.getmany(timeout_ms=200)
                for records in batch.values():
                    out += records
        finally:
            await consumer.stop()
        return out
    return asyncio.run(go())


def streamrag_audit(mesh: Endpoints, *args: str) -> tuple[int, Any]:
    """The `streamrag audit` command, as a user runs it, pointed at this mesh: its exit code
    and its JSON report (or its stderr when it printed none)."""
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_LEDGER_RPC_URL": mesh.rpc_url}
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "audit", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def wait_verified(mesh: Endpoints, what: str, timeout_s: float) -> None:
    """Until `streamrag audit verify` passes; failing, the last report says why."""
    from tests.support.polling import eventually

    reports: list[tuple[int, Any]] = []

    def verified() -> bool:
        reports[:] = [streamrag_audit(mesh, "verify")]
        code, report = reports[0]
        return code == 0 and report["ok"]
    try:
        eventually(verified, f"`audit verify` to pass {what}", timeout_s)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last report: {reports[-1]!r:.4000}") from None


@contextmanager
def searchable_domain(mesh: Endpoints, prefix: str, docs: Sequence[str], question: str,
                      title: str) -> Iterator[tuple[str, Any]]:
    """`docs` produced in a domain of their own (`prefix`-named) and searchable for
    `question`: the domain and a gRPC stub, the channel open while the block runs."""
    from tests.support.polling import eventually

    domain = uid(prefix)
    produce(mesh, [json.dumps({"id": uid(prefix), "text": text, "source": f"{prefix}-test",
                               "domain": domain, "title": f"{title} {i}"}).encode()
                   for i, text in enumerate(docs)])
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        api = inference_pb2_grpc.InferenceStub(channel)
        eventually(lambda: len(api.Retrieve(inference_pb2.RetrieveRequest(
            question=question, domain=domain), timeout=15).chunks) == len(docs),
            "every document")
        yield domain, api
