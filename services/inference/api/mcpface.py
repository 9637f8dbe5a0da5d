"""The MCP face of the Inference API: shared/mcptools.py's tools over streamable HTTP, each
calling the gRPC servicer's own method, as the HTTP/JSON face does (rest.py).

A tool call's `Authorization: Bearer` header is verified by the TokenVerifier gRPC uses; the
servicer runs with that principal bound and a stand-in CallContext, so limits, deadlines
(the server's default: MCP sends none), access labels, the answer cache and the query audit
are the servicer's. A failure gets the status gRPC would give it (status.failed) and comes
back as a tool error with gRPC's reason and field. A request without acceptable credentials
is refused with 401 before the MCP session sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn
from google.protobuf.message import Message
from starlette.types import ASGIApp, Receive, Scope, Send

from services.inference.api.auth import AuthError, DeniedSink, TokenVerifier
from services.inference.api.jsoncodec import refusal
from services.inference.api.principal import bound
from services.inference.api.server import InferenceServicer
from services.inference.api.status import FailureSink, failed
from services.inference.settings import InferenceSettings
from shared.mcptools import Caller, CallFailedError, server

PATH = "/mcp"


class McpCall:
    """The servicer's CallContext for a tool call: no deadline of its own (the server's
    default bounds it), the caller's address as its peer."""

    def __init__(self, peer: str) -> None:
        self._peer = peer

    def time_remaining(self) -> float | None:
        return None

    def peer(self) -> str:
        return self._peer


class ServicerCalls:
    """shared/mcptools.InferenceCalls answered by the servicer in this process."""

    def __init__(self, servicer: InferenceServicer, verifier: TokenVerifier,
                 on_failure: FailureSink | None = None) -> None:
        self.servicer, self.verifier, self.on_failure = servicer, verifier, on_failure

    async def __call__(self, method: str, request: Message, caller: Caller) -> Message:
        try:
            who = self.verifier.verify_metadata(list((caller.headers or {}).items()))
        except AuthError as exc:  # the ASGI guard refused it already; stdio has no headers
            raise CallFailedError("UNAUTHENTICATED", f"{exc.reason}: {exc.detail}",
                                  exc.reason) from exc
        try:
            with bound(who):
                reply: Message = await getattr(self.servicer, method)(request,
                                                                      McpCall(caller.peer))
        except Exception as exc:
            code, details, _, trailing = failed(method, exc, self.on_failure)
            meta = dict(trailing)
            raise CallFailedError(code.name, details, meta.get("streamrag-reason", ""),
                                  meta.get("streamrag-field", "")) from exc
        return reply


class Guard:
    """ASGI middleware: a request whose credentials the verifier refuses gets 401 with the
    HTTP face's error body (reason as gRPC's), before any MCP session is made."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier,
                 on_denied: DeniedSink | None = None) -> None:
        self.app, self.verifier, self.on_denied = app, verifier, on_denied

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
            try:
                self.verifier.verify_metadata(headers)
            except AuthError as exc:
                if self.on_denied is not None:
                    self.on_denied(exc.reason)
                status, body = refusal(exc)
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": json.dumps(body).encode()})
                return
        await self.app(scope, receive, send)


class _Embedded(uvicorn.Server):
    """uvicorn inside the service's own loop: the worker, not uvicorn, owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class McpFace:
    """The MCP endpoint (PATH) of one servicer on grpc_host:mcp_port, TLS as gRPC's."""

    def __init__(self, servicer: InferenceServicer, verifier: TokenVerifier,
                 on_failure: FailureSink | None = None,
                 on_denied: DeniedSink | None = None) -> None:
        self.calls = ServicerCalls(servicer, verifier, on_failure)
        self.verifier, self.on_denied = verifier, on_denied
        self._server: _Embedded | None = None
        self._serving: asyncio.Task[None] | None = None

    def app(self, host: str) -> Any:
        # Stateless, JSON replies: no session lives in one replica, so any replica answers.
        app = server(self.calls).streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True, host=host)
        return Guard(app, self.verifier, self.on_denied)

    async def start(self, settings: InferenceSettings) -> int:
        """Listening (the port bound) once this returns; a port taken fails here."""
        sock = socket.create_server((settings.grpc_host, settings.mcp_port),
                                    family=_family(settings.grpc_host))
        config = uvicorn.Config(self.app(settings.grpc_host), log_config=None,
                                access_log=False, lifespan="on",
                                ssl_certfile=settings.tls_cert, ssl_keyfile=settings.tls_key,
                                timeout_graceful_shutdown=int(settings.grace_s) or 1)
        self._server = _Embedded(config)
        self._serving = asyncio.create_task(self._server.serve([sock]))
        while not self._server.started:
            if self._serving.done():
                await self._serving  # its failure, raised here
                raise OSError("the MCP server stopped while starting")
            await asyncio.sleep(0.01)
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            await self._serving


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
