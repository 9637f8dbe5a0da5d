"""A graceful stop loses no query audit: an inference worker beside the session mesh answers
Retrieve calls from four clients without pause while it is sent SIGTERM; every call it
answered, those its grace period finished included, has its audit on audit.queries.v1.

The audits are sent on a 0.2 s timer; the calls answered in the last interval before the
stop (and during the grace period) are sent by the runtime once the server has answered its
last call, while the producer is still up (services/inference/audit/agents.py)."""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from services.cli.mesh import Endpoints, free_port
from services.cli.procs import service_argv, spawn, stop
from shared.contract.codec import decode
from shared.contract.query_audit import question_sha256
from shared.contract.records import QueryAudit
from shared.contract.topics import AUDIT_QUERIES
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.grpc_worker import wait_serving
from tests.support.mesh import GUARD_ENV, produce, read_topic, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
CLIENTS, BEFORE_STOP = 4, 12


def test_a_graceful_stop_sends_the_audit_of_every_answered_call(
        mesh: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> None:
    work = tmp_path_factory.mktemp("audit-stop")
    port = free_port()
    env = {**GUARD_ENV, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_INFERENCE_GRPC_PORT": str(port),
           "STREAMRAG_DATA_DIR": str(work / "data"),
           "STREAMRAG_INFERENCE_GENERATOR_BUNDLED": "false",
           "STREAMRAG_INFERENCE_DEVICE": "cpu",
           "STREAMRAG_INFERENCE_SHARD_TIMEOUT_S": "5",
           "STREAMRAG_INFERENCE_GRACE_S": "10"}
    child = spawn("inference-audit-stop", service_argv("inference"), work / "run", env)
    target = f"127.0.0.1:{port}"
    tag = uid("stop")
    doc_id = f"{tag}-doc"
    produce(mesh, [json.dumps({"id": doc_id, "source": tag, "text":
                               "The tidal turbine logged a bearing fault at dawn."}).encode()],
            key=doc_id.encode())
    try:
        wait_serving(target, child, 180)
        eventually(lambda: _retrieve(target, "tidal turbine bearing fault", tag),
                   "the document searchable through the worker", 120)
        answered = _answered_across_a_stop(target, tag, child.popen.pid)
        child.popen.wait(180)  # one SIGTERM only: the stop under test, not stop()'s second
    finally:
        stop([child], 30)
    assert child.popen.returncode == 0, "the worker stopped gracefully"
    assert len(answered) >= BEFORE_STOP  # answered right up to the stop
    wanted = {question_sha256(q) for q in answered}

    def audited() -> set[str]:
        return {decode(QueryAudit, r.value).question_sha256
                for r in read_topic(mesh, AUDIT_QUERIES.name)} & wanted
    got = eventually(lambda: (a if (a := audited()) == wanted else None),
                     "an audit for every call the stopped worker answered", 60)
    assert got == wanted
    log = (work / "run" / "logs" / "inference-audit-stop.log").read_text()
    assert "query audits flushed on stop" in log


def _retrieve(target: str, question: str, source: str) -> bool:
    with grpc.insecure_channel(target) as channel:
        reply = pb_grpc.InferenceStub(channel).Retrieve(
            pb.RetrieveRequest(question=question, source=source, top_k=3), timeout=15)
    return bool(reply.chunks)


def _answered_across_a_stop(target: str, source: str, pid: int) -> list[str]:
    """Questions answered OK by `CLIENTS` clients asking without pause; SIGTERM once
    `BEFORE_STOP` are answered; the clients stop at their first refusal."""
    answered: list[str] = []
    lock, enough = threading.Lock(), threading.Event()

    def client(n: int) -> None:
        with grpc.insecure_channel(target) as channel:
            stub = pb_grpc.InferenceStub(channel)
            for i in range(10_000):
                question = f"turbine bearing fault {n} {i} {uuid.uuid4().hex}"
                try:
                    stub.Retrieve(pb.RetrieveRequest(question=question, source=source,
                                                     top_k=3), timeout=15)
                except grpc.RpcError:
                    return  # the server is stopping or gone
                with lock:
                    answered.append(question)
                    if len(answered) >= BEFORE_STOP:
                        enough.set()

    with ThreadPoolExecutor(CLIENTS) as pool:
        for n in range(CLIENTS):
            pool.submit(client, n)
        assert enough.wait(120), "the worker answered calls before the stop"
        os.killpg(pid, signal.SIGTERM)
    return answered
