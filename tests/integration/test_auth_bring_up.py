"""`streamrag up` with auth configured, as a user runs it: ready, demo answered, and no
cache of one caller's questions shared with another.

The real bring-up (`streamrag up`, one-process mesh, its own broker and chain) with a JWT
secret, an audience and the service account's token: its readiness probe and demo query
authenticate with STREAMRAG_MESH_INFERENCE_TOKEN, so it reaches "mesh ready" and prints
the demo answer. Before, the probe sent no token and `up` waited out its ready timeout
(300 s by default) logging `refused ...: missing_token` twice a second. Then two users ask
the same new question: the second one's question vector is encoded afresh, not taken from
the first one's call (inference's /metrics counts each lookup).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from services.cli.mesh import free_port
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.anvil import needs_anvil
from tests.support.mesh import MESH_ENV, uid
from tests.support.polling import eventually
from tests.support.tokens import AUDIENCE, SECRET, bearer, hs256

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), needs_anvil]
ROOT = Path(__file__).resolve().parents[2]
STREAMRAG = str(Path(sys.executable).parent / "streamrag")
SERVICE_TOKEN = "auth-bring-up-service-token"
READY_TIMEOUT_S = 400  # only bounds a broken bring-up; a loaded 2-core machine is slow
READY = re.compile(r"mesh ready \(every shard answers\) after ([0-9.]+)s")


@dataclass(frozen=True)
class Up:
    target: str
    metrics_url: str
    output: Path
    process: subprocess.Popen[bytes]

    def text(self) -> str:
        return self.output.read_text(errors="replace")


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    work = tmp_path_factory.mktemp("auth-up")
    grpc_port, metrics_port = free_port(), free_port()
    keep = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_")}
    env = {**keep, **MESH_ENV, "PYTHONPATH": str(ROOT),
           "STREAMRAG_MESH_RUN_DIR": str(work / "run"),
           "STREAMRAG_MESH_ANVIL_BIN": str(ROOT / ".tools/node_modules/.bin/anvil"),
           "STREAMRAG_MESH_KAFKA_LIBS": str(ROOT / ".tools/kafka/libs"),
           "STREAMRAG_MESH_READY_TIMEOUT_S": str(READY_TIMEOUT_S),
           "STREAMRAG_MESH_INFERENCE_TARGET": f"127.0.0.1:{grpc_port}",
           "STREAMRAG_MESH_INFERENCE_TOKEN": SERVICE_TOKEN,
           "STREAMRAG_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",
           "STREAMRAG_LEDGER_RPC_URL": f"http://127.0.0.1:{free_port()}",
           "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port),
           "STREAMRAG_MESH_INFERENCE_HTTP_PORT": str(free_port()),  # not 8080: suites meet
           "STREAMRAG_MESH_INFERENCE_MCP_PORT": str(free_port()),  # nor 8090
           "STREAMRAG_INFERENCE_METRICS_PORT": str(metrics_port),
           "STREAMRAG_INFERENCE_AUTH_TOKEN": SERVICE_TOKEN,
           "STREAMRAG_INFERENCE_JWT_SECRET": SECRET,
           "STREAMRAG_INFERENCE_JWT_AUDIENCE": AUDIENCE}
    output = work / "up.out"
    with open(output, "wb") as out:
        process = subprocess.Popen([STREAMRAG, "up"], cwd=work, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    running = Up(f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{metrics_port}/metrics",
                 output, process)
    try:
        yield running
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C: `up` stops the whole mesh
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _demo_answered(up: Up) -> str | None:
    assert up.process.poll() is None, f"streamrag up exited {up.process.returncode}:\n" \
        + up.text()[-4000:]
    text = up.text()
    return text if "first answer" in text else None


def test_up_with_auth_configured_gets_ready_and_answers_the_demo(up: Up) -> None:
    text = eventually(lambda: _demo_answered(up), "`streamrag up` ready and the demo "
                      "answered", READY_TIMEOUT_S + 120, 1.0)
    assert READY.search(text) is not None, text[-4000:]
    assert "Q: What caused the payments outage?" in text
    # The demo documents carry no labels: only all access (the service token) reads them,
    # so an answer citing them shows the demo query was the service account's.
    assert "incident-2026-11-28-payments" in text
    assert "missing_token" not in text and "not answered yet" not in text


def _question_cache(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        body = reply.read().decode()
    found = re.findall(r'^streamrag_inference_question_cache_total\{result="(\w+)"\} (\S+)$',
                       body, re.M)
    return {result: float(value) for result, value in found}


def test_a_question_another_user_just_asked_is_encoded_again(up: Up) -> None:
    eventually(lambda: _demo_answered(up), "`streamrag up` ready", READY_TIMEOUT_S + 120, 1.0)
    question = f"which runbook covers the {uid('auth-up')} rollback"

    def ask(who: str, groups: list[str]) -> pb.QueryResponse:
        with grpc.insecure_channel(up.target) as channel:
            return pb_grpc.InferenceStub(channel).Query(
                pb.QueryRequest(question=question, answer_mode="extractive"),
                metadata=bearer(hs256(who, groups)), timeout=60)

    ask("carol", ["hr"])
    before = _question_cache(up.metrics_url)
    dave = ask("dave", ["payments"])
    after = _question_cache(up.metrics_url)
    # Shared, dave's lookup would have been a hit (carol's vector) and his embed_ms tiny.
    assert after.get("miss", 0) - before.get("miss", 0) == 1
    assert after.get("hit", 0) - before.get("hit", 0) == 0
    assert not dave.citations  # the demo documents are unlabelled: users read none of them
    ask("carol", ["hr"])  # her own scope: still cached for her (or her answer is)
    again = _question_cache(up.metrics_url)
    assert again.get("miss", 0) == after.get("miss", 0)
