"""The mesh readiness probe: serving, every shard answering, cheap with a generator, and
authenticated where inference checks tokens."""

from __future__ import annotations

import asyncio
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.cli.mesh import Mesh
from services.cli.ready import bearer, wait_ready
from services.cli.settings import MeshSettings
from shared.errors import ConfigError
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import KafkaSettings, LedgerSettings
from tests.support.tokens import AUDIENCE, SECRET
from tests.unit.inference.fakes import FakeSearch
from tests.unit.inference.serving import CHUNKS, serving


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


def test_the_probe_authenticates_to_an_inference_with_auth_configured() -> None:
    """The real API with a service token and JWT users: the probe with the token is ready
    at once; without it inference refuses it (missing_token) and the wait stops there,
    naming the setting, instead of retrying until the ready timeout."""
    async def go() -> tuple[float, BaseException | None, float]:
        auth = {"auth_token": "s3rvice", "jwt_secret": SECRET, "jwt_audience": AUDIENCE}
        async with serving(FakeSearch(CHUNKS), **auth) as (runtime, _):
            target = f"127.0.0.1:{runtime.port}"
            await asyncio.to_thread(wait_ready, target, 30, lambda: [], Path("logs"),
                                    bearer("s3rvice"))
            ready_refusals = runtime.metrics.sample(
                "streamrag_inference_auth_failures_total", {"reason": "missing_token"})
            try:
                await asyncio.to_thread(wait_ready, target, 30, lambda: [], Path("logs"))
            except ConfigError as exc:
                refused: BaseException | None = exc
            else:
                refused = None
            after = runtime.metrics.sample("streamrag_inference_auth_failures_total",
                                           {"reason": "missing_token"})
            return ready_refusals, refused, after
    before, refused, after = asyncio.run(go())
    assert before == 0.0  # every probe of the first wait carried the token
    assert isinstance(refused, ConfigError)
    assert "STREAMRAG_MESH_INFERENCE_TOKEN" in str(refused)
    assert "UNAUTHENTICATED, missing_token" in str(refused)
    assert after == 1.0  # one refused probe, not one every half second until the timeout


def test_the_bring_ups_token_is_the_meshs_else_the_service_accounts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STREAMRAG_INFERENCE_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("STREAMRAG_MESH_INFERENCE_TOKEN", raising=False)

    def token(env: dict[str, str] | None = None, **mesh: Any) -> str | None:
        settings = MeshSettings(run_dir=tmp_path, **mesh)
        return Mesh(settings, KafkaSettings(), LedgerSettings(), env).probe_token()
    assert token() is None  # open: nothing to send
    monkeypatch.setenv("STREAMRAG_INFERENCE_AUTH_TOKEN", "from-environment")
    assert token() == "from-environment"  # what the services inherit
    assert token({"STREAMRAG_INFERENCE_AUTH_TOKEN": "given"}) == "given"  # what they are given
    assert token({"STREAMRAG_INFERENCE_AUTH_TOKEN": "given"},
                 inference_token="a-jwt") == "a-jwt"
    assert bearer("a-jwt") == (("authorization", "Bearer a-jwt"),) and bearer(None) == ()
