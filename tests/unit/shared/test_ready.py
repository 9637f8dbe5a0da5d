"""The mesh readiness probe: serving, every shard answering, and cheap with a generator."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from shared.cli.ready import wait_ready
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc


class Recorder(pb_grpc.InferenceServicer):
    """Answers Query with `partial` for the first `partial_for` calls; keeps every request."""

    def __init__(self, partial_for: int) -> None:
        self.requests: list[pb.QueryRequest] = []
        self.partial_for = partial_for

    def Query(self, request: pb.QueryRequest, context: Any) -> pb.QueryResponse:
        self.requests.append(request)
        return pb.QueryResponse(partial=len(self.requests) <= self.partial_for)


def serve(recorder: Recorder) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_InferenceServicer_to_server(recorder, server)
    checker = health.HealthServicer()
    checker.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


def test_waits_for_a_complete_answer_and_asks_for_one_token_only() -> None:
    recorder = Recorder(partial_for=2)
    server, target = serve(recorder)
    try:
        wait_ready(target, 30, lambda: [], Path("logs"))
    finally:
        server.stop(0)
    assert len(recorder.requests) == 3  # two partial answers were not ready yet
    # With a generator on a CPU a full answer could outlast the probe's timeout forever.
    assert {r.max_new_tokens for r in recorder.requests} == {1}


def test_a_dead_service_stops_the_wait_at_once() -> None:
    recorder = Recorder(partial_for=10**6)
    server, target = serve(recorder)
    try:
        with pytest.raises(RuntimeError, match="retrieval kept exiting; see logs"):
            wait_ready(target, 30, lambda: ["retrieval"], Path("logs"))
    finally:
        server.stop(0)
