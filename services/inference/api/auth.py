"""The optional bearer-token check: every call but health checks must carry the token."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

# Orchestrators probe health without credentials; everything else is locked.
OPEN_PREFIXES = ("/grpc.health.v1.Health/",)


class BearerAuth(grpc.aio.ServerInterceptor):
    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith(OPEN_PREFIXES):
            return handler
        sent = dict(details.invocation_metadata or ()).get("authorization", "")
        given = sent.encode() if isinstance(sent, str) else bytes(sent)
        if hmac.compare_digest(given, self._expected):  # constant time: no timing oracle
            return handler
        return _denied(handler, "missing" if not sent else "wrong")


def _denied(handler: Any, what: str) -> Any:
    """A handler of the same shape as `handler` that answers UNAUTHENTICATED."""
    details = f"{what} bearer token: send the header 'authorization: Bearer <token>'"

    async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, details)

    kw = {"request_deserializer": handler.request_deserializer,
          "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(deny, **kw)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(deny, **kw)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(deny, **kw)
    return grpc.stream_stream_rpc_method_handler(deny, **kw)
