"""`streamrag query` authenticates with --token or STREAMRAG_MESH_INFERENCE_TOKEN."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator
from concurrent import futures
from typing import Any
from unittest import mock

import grpc
import pytest

from services.cli import query
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc


class Servicer(pb_grpc.InferenceServicer):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def Query(self, request: Any, context: grpc.ServicerContext) -> pb.QueryResponse:
        sent = dict(context.invocation_metadata()).get("authorization", "")
        self.seen.append(str(sent))
        if sent != "Bearer right":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing_token")
        return pb.QueryResponse(answer="an answer")


@pytest.fixture
def server() -> Iterator[tuple[str, Servicer]]:
    servicer = Servicer()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_InferenceServicer_to_server(servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        srv.stop(0)


def args(target: str, token: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    query.add_parser(parser.add_subparsers())
    argv = ["query", "why?", "--target", target, *(["--token", token] if token else [])]
    return parser.parse_args(argv)


@pytest.mark.parametrize(("flag", "env", "sent", "code"), [
    ("right", None, "Bearer right", 0),
    (None, "right", "Bearer right", 0),
    ("wrong", "right", "Bearer wrong", 1),  # the flag wins over the setting
    (None, None, "", 1),
])
def test_the_token_comes_from_the_flag_else_the_setting(
        server: tuple[str, Servicer], flag: str | None, env: str | None, sent: str,
        code: int) -> None:
    target, servicer = server
    environ = {"STREAMRAG_MESH_INFERENCE_TOKEN": env} if env else {}
    out = io.StringIO()
    with mock.patch.dict("os.environ", environ):
        assert query.run(args(target, flag), out) == code
    assert servicer.seen == [sent]
    assert ("an answer" in out.getvalue()) is (code == 0)
