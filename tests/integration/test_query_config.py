"""The query-path configuration on the real multi-process mesh: `streamrag config set`
changes the default top_k and the next query follows it without a restart; a bad change
(from the CLI, or a bad record produced straight to config.query.v1) is refused and not
applied; `streamrag config rollback` restores the earlier content."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request

import grpc
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from services.cli.mesh import Endpoints
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.mesh import produce, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def streamrag_config(mesh: Endpoints, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap}
    return subprocess.run([sys.executable, "-m", "services.cli.main", "config", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def written(result: subprocess.CompletedProcess[str]) -> int:
    assert result.returncode == 0, result.stderr
    return int(result.stdout.split()[1])  # "version N written by ..."


def refused(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "streamrag_inference_config_refused_total")


def produce_config(mesh: Endpoints, key: bytes, value: bytes) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("config.query.v1", value, key=key)
        finally:
            await producer.stop()
    asyncio.run(go())


def test_a_config_change_reaches_the_next_query_and_rollback_restores_it(
        mesh: Endpoints, mesh_metrics_url: str) -> None:
    domain = uid("qcfg")
    docs = [{"id": uid("qcfg-doc"), "text": f"The relay number {i} tripped at dawn.",
             "source": "qcfg-test", "domain": domain, "event_time": "2026-11-28T00:05:00Z",
             "title": f"Relay {i}"} for i in range(3)]
    for doc in docs:
        produce(mesh, [json.dumps(doc).encode()], key=doc["id"].encode())
    # The content the mesh ran with before, as a version to come back to.
    baseline = written(streamrag_config(mesh, "set", "--author", "itest", "--note", "baseline"))
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = pb_grpc.InferenceStub(channel)

        def ask() -> pb.RetrieveResponse:
            return stub.Retrieve(pb.RetrieveRequest(question="which relay tripped",
                                                    domain=domain), timeout=15)

        def served(version: int, hits: int) -> pb.RetrieveResponse | None:
            r = ask()
            return r if (r.config_version, len(r.chunks)) == (version, hits) else None

        eventually(lambda: served(baseline, 3), "all three documents under the baseline")
        try:
            done = streamrag_config(mesh, "set", "default_top_k=2", "--author", "itest",
                                    "--wait", "15", "--target", mesh.grpc_target)
            two = written(done)
            assert f"applied by {mesh.grpc_target}" in done.stdout
            response = served(two, 2)  # --wait saw it applied: the very next call has it
            assert response is not None
            assert response.variant == "base"

            bad = streamrag_config(mesh, "set", "default_top_k=0")
            assert bad.returncode == 2 and "refused" in bad.stderr
            assert "default_top_k" in bad.stderr
            before = refused(mesh_metrics_url)
            record = {"version": two + 1, "author": "mallory", "at": 0.0,
                      "knobs": {"default_top_k": "many"}}
            produce_config(mesh, f"query/{two + 1:012d}".encode(), json.dumps(record).encode())
            eventually(lambda: refused(mesh_metrics_url) > before, "the bad record counted")
            assert (r := ask()).config_version == two and len(r.chunks) == 2
        finally:
            back = written(streamrag_config(mesh, "rollback", str(baseline), "--author",
                                            "itest"))
        assert back == two + 1  # the refused record took no version
        eventually(lambda: served(back, 3), "the baseline restored", 15)
    history = streamrag_config(mesh, "history")
    assert history.returncode == 0
    assert f"version {back} " in history.stdout and f"rollback to {baseline}" in history.stdout
    assert "refused, invalid_field" in history.stdout
