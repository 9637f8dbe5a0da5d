"""`streamrag mcp`: an MCP server on stdio whose tools call a running mesh's gRPC API.

For an MCP client that starts its servers as commands (a desktop or IDE assistant). Each
tool (shared/mcptools.py) is one gRPC call to the inference target `streamrag query` uses,
with its bearer token, so the mesh verifies, filters and audits it as any gRPC call; a
failure comes back as a tool error with the status and the streamrag-reason and
streamrag-field trailing metadata. stdout carries the protocol: logs go to stderr.
The MCP SDK is imported when the command runs, not with every `streamrag` command.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

import grpc
from google.protobuf.message import Message

from services.cli.query import bearer
from services.cli.settings import MeshSettings
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from shared.mcptools import Caller, CallFailedError

Metadata = tuple[tuple[str, str], ...]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve MCP tools (search, ask, status) on stdio over a "
                                   "running mesh's gRPC API")
    p.add_argument("--target", default=None,
                   help="inference API host:port (default: STREAMRAG_MESH_INFERENCE_TARGET)")
    p.add_argument("--token", default=None,
                   help="bearer token (default: STREAMRAG_MESH_INFERENCE_TOKEN, else none)")
    p.add_argument("--timeout", type=float, default=30.0, help="each call's deadline, seconds")


class GrpcCalls:
    """shared/mcptools.InferenceCalls answered by a mesh over gRPC."""

    def __init__(self, stub: pb_grpc.InferenceStub, metadata: Metadata,
                 timeout_s: float) -> None:
        self.stub, self.metadata, self.timeout_s = stub, metadata, timeout_s

    async def __call__(self, method: str, request: Message, caller: Caller) -> Message:
        del caller  # stdio: the caller is whoever holds the token
        try:
            reply: Message = await getattr(self.stub, method)(
                request, timeout=self.timeout_s, metadata=self.metadata)
        except grpc.aio.AioRpcError as exc:
            raise failure(exc) from exc
        return reply


def failure(exc: grpc.aio.AioRpcError) -> CallFailedError:
    """The tool error's parts of a failed call: its code, details and trailing metadata."""
    from shared.mcptools import CallFailedError
    meta = {k: v for k, v in (exc.trailing_metadata() or ()) if isinstance(v, str)}
    return CallFailedError(exc.code().name, exc.details() or "",
                           meta.get("streamrag-reason", ""), meta.get("streamrag-field", ""))


async def serve(target: str, metadata: Metadata, timeout_s: float) -> None:
    from shared.mcptools import server
    async with grpc.aio.insecure_channel(target) as channel:
        calls = GrpcCalls(pb_grpc.InferenceStub(channel), metadata, timeout_s)
        await server(calls).run_stdio_async()


def run(args: argparse.Namespace) -> int:
    mesh = MeshSettings()
    asyncio.run(serve(args.target or mesh.inference_target, bearer(args.token, mesh),
                      args.timeout))
    return 0
