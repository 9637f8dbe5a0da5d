"""The HTTP/JSON face of the Inference API: the gRPC servicer's own methods, over aiohttp.

A handler only converts: it verifies the bearer token with the same TokenVerifier as gRPC,
reads the body into the proto request (jsoncodec.py), calls the InferenceServicer method
gRPC calls with the caller's principal bound, and writes the reply as JSON (a stream as
server-sent events). Limits, deadlines (the request's deadline_ms, else the server's
default), access labels, the answer cache, receipts and the query audit are therefore the
servicer's, the same for both faces; a failure gets the status gRPC would give it
(status.failed), answered with google.rpc's HTTP code for it.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from aiohttp import web
from google.protobuf.message import Message

from services.inference.api import openapi
from services.inference.api.auth import AuthError, DeniedSink, TokenVerifier
from services.inference.api.jsoncodec import failure, parse_request, refusal, to_json
from services.inference.api.principal import Principal, bound
from services.inference.api.routes import Route, routes
from services.inference.api.server import InferenceServicer
from services.inference.api.status import FailureSink, failed
from services.inference.settings import InferenceSettings

MAX_BODY_BYTES = 1 << 20  # a request is a question and filters: far less


class HttpCall:
    """The servicer's CallContext for a call that came over HTTP. HTTP sends no deadline of
    its own: the request's deadline_ms bounds the call, else the server's default."""

    def __init__(self, request: web.Request) -> None:
        self._peer = _peer(request)

    def time_remaining(self) -> float | None:
        return None

    def peer(self) -> str:
        return self._peer


class RestFace:
    """The HTTP routes of one servicer, verified by one TokenVerifier."""

    def __init__(self, servicer: InferenceServicer, verifier: TokenVerifier,
                 on_failure: FailureSink | None = None,
                 on_denied: DeniedSink | None = None) -> None:
        self.servicer, self.verifier = servicer, verifier
        self.on_failure, self.on_denied = on_failure, on_denied

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        for route in routes():
            handler = self._stream if route.streams else self._unary
            app.router.add_post(route.path, partial(handler, route))
        document = openapi.document()

        async def described(_: web.Request) -> web.StreamResponse:
            return _json(200, document)
        app.router.add_get(openapi.PATH, described)
        return app

    async def _unary(self, route: Route, request: web.Request) -> web.StreamResponse:
        try:
            who, message = await self._accept(route, request)
        except AuthError as exc:
            return self._refused(exc)
        except Exception as exc:
            return self._failed(route.method, exc)
        try:
            with bound(who):
                reply = await getattr(self.servicer, route.method)(message, HttpCall(request))
        except Exception as exc:
            return self._failed(route.method, exc)
        return _json(200, to_json(reply))

    async def _stream(self, route: Route, request: web.Request) -> web.StreamResponse:
        """Server-sent events, one per streamed message (`event:` its oneof's choice). A
        failure before the first is an ordinary error reply; after it, an `error` event."""
        try:
            who, message = await self._accept(route, request)
        except AuthError as exc:
            return self._refused(exc)
        except Exception as exc:
            return self._failed(route.method, exc)
        with bound(who):
            events: AsyncIterator[Message] = getattr(self.servicer, route.method)(
                message, HttpCall(request))
            try:
                return await self._send(route, request, events)
            finally:
                await events.aclose()  # type: ignore[attr-defined]  # ends a call cut off

    async def _send(self, route: Route, request: web.Request,
                    events: AsyncIterator[Message]) -> web.StreamResponse:
        try:
            first = await anext(events)
        except Exception as exc:
            return self._failed(route.method, exc)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            await response.write(_event(first))
            async for event in events:
                await response.write(_event(event))
        except ConnectionError:
            return response  # the caller went away; the servicer audits the cut-off stream
        except Exception as exc:
            _, body = failure(failed(route.method, exc, self.on_failure))
            await response.write(f"event: error\ndata: {json.dumps(body)}\n\n".encode())
        await response.write_eof()
        return response

    async def _accept(self, route: Route, request: web.Request) -> tuple[Principal, Message]:
        """The caller (before the body is read) and its request; AuthError or InvalidInput."""
        who = self.verifier.verify_metadata(list(request.headers.items()))
        return who, parse_request(await request.read(), route.request)

    def _refused(self, exc: AuthError) -> web.Response:
        if self.on_denied is not None:
            self.on_denied(exc.reason)
        return _json(*refusal(exc))

    def _failed(self, method: str, exc: Exception) -> web.Response:
        if isinstance(exc, web.HTTPException):
            raise exc  # aiohttp's own answer, e.g. 413 for a body over MAX_BODY_BYTES
        return _json(*failure(failed(method, exc, self.on_failure)))


async def serve(face: RestFace, settings: InferenceSettings) -> tuple[web.AppRunner, int]:
    """The face listening on grpc_host:http_port (TLS with gRPC's certificate when set);
    returns its runner (to stop it) and the port bound."""
    runner = web.AppRunner(face.app(), access_log=None, shutdown_timeout=settings.grace_s,
                           # a long JWT is refused by the verifier with a reason, as in gRPC
                           max_field_size=settings.max_metadata_bytes)
    await runner.setup()
    context = None
    if settings.tls_cert is not None and settings.tls_key is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    site = web.TCPSite(runner, settings.grpc_host, settings.http_port, ssl_context=context)
    await site.start()
    return runner, int(runner.addresses[0][1])


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status)


def _event(message: Message) -> bytes:
    oneofs = message.DESCRIPTOR.oneofs
    name = (message.WhichOneof(oneofs[0].name) if oneofs else None) or "message"
    return f"event: {name}\ndata: {json.dumps(to_json(message))}\n\n".encode()


def _peer(request: web.Request) -> str:
    """The caller's address as gRPC writes a peer ("ipv4:host:port"), so that routing among
    variants by address treats a caller alike over both faces."""
    peername = request.transport.get_extra_info("peername") if request.transport else None
    if not peername:
        return ""
    host, port = peername[0], peername[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
