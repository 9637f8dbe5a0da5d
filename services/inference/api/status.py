"""Every failure of a gRPC call mapped to a status code in one place, a server interceptor.

OutOfRangeError           -> OUT_OF_RANGE, naming the field (same metadata as below)
NoGeneratorError          -> FAILED_PRECONDITION, naming the field (same metadata)
NotFoundError             -> NOT_FOUND, naming the field (same metadata)
PermissionDeniedError     -> PERMISSION_DENIED, naming the field (same metadata)
InvalidInput              -> INVALID_ARGUMENT, naming the field (metadata streamrag-field,
                             streamrag-reason)
QueueFullError            -> RESOURCE_EXHAUSTED, saying so
InfrastructureError       -> UNAVAILABLE (warming up, no shard answered, shutting down)
DeadlineError             -> DEADLINE_EXCEEDED (the request's own deadline_ms, or the
                             caller's deadline already gone)
anything else             -> INTERNAL with the exception's type only: its message may hold
                             stored text, and a bug must still not end a call in UNKNOWN

Each failure increments streamrag_inference_failures_total{method, reason}.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from services.inference.errors import (
    NoGeneratorError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
)
from shared.batching.queue import QueueFullError
from shared.errors import InfrastructureError, InvalidInput, StreamragError

log = logging.getLogger(__name__)
Status = tuple[grpc.StatusCode, str, str, tuple[tuple[str, str], ...]]
FailureSink = Callable[[str, str], None]  # (method, reason) of a failed call


class DeadlineError(StreamragError):
    """The request's deadline passed before it could be answered."""


def status_of(exc: BaseException) -> Status:
    """(code, details, reason for the metric, trailing metadata) for a call's exception."""
    if isinstance(exc, InvalidInput):
        field = exc.field or "request"
        code = (grpc.StatusCode.OUT_OF_RANGE if isinstance(exc, OutOfRangeError)
                else grpc.StatusCode.FAILED_PRECONDITION if isinstance(exc, NoGeneratorError)
                else grpc.StatusCode.NOT_FOUND if isinstance(exc, NotFoundError)
                else grpc.StatusCode.PERMISSION_DENIED
                if isinstance(exc, PermissionDeniedError)
                else grpc.StatusCode.INVALID_ARGUMENT)
        return (code,
                f"{_verb(exc)} {field} ({exc.reason}): {exc.detail}", exc.reason,
                (("streamrag-field", field), ("streamrag-reason", exc.reason)))
    if isinstance(exc, QueueFullError):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), "queue_full", ()
    if isinstance(exc, InfrastructureError):
        return grpc.StatusCode.UNAVAILABLE, str(exc), type(exc).__name__, ()
    if isinstance(exc, DeadlineError):
        return grpc.StatusCode.DEADLINE_EXCEEDED, str(exc), "deadline", ()
    name = type(exc).__name__
    return grpc.StatusCode.INTERNAL, f"internal error ({name})", f"internal_{name}", ()


def _verb(exc: InvalidInput) -> str:
    if isinstance(exc, NotFoundError):
        return "no such"
    return "not permitted:" if isinstance(exc, PermissionDeniedError) else "invalid"


def _passes_through(exc: BaseException) -> bool:
    """Not failures to map: an abort already chose its status; cancellation is the caller's."""
    return isinstance(exc, asyncio.CancelledError | grpc.aio.AbortError) or \
        not isinstance(exc, Exception)


class StatusMapper(grpc.aio.ServerInterceptor):
    """Wraps every handler so whatever it raises ends in a precise status, never UNKNOWN."""

    def __init__(self, on_failure: FailureSink | None = None) -> None:
        self.on_failure = on_failure

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        if handler is None:
            return None
        method = details.method.rsplit("/", 1)[-1]
        kw = {"request_deserializer": handler.request_deserializer,
              "response_serializer": handler.response_serializer}
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap(method, handler.unary_unary), **kw)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap(method, handler.unary_stream), **kw)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                self._wrap(method, handler.stream_unary), **kw)
        return grpc.stream_stream_rpc_method_handler(
            self._wrap(method, handler.stream_stream), **kw)

    def _wrap(self, method: str, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        """The same kind of handler (a coroutine, or an async generator for streams that
        yield; Health.Watch writes instead), mapping whatever it raises."""
        if inspect.isasyncgenfunction(behaviour):
            async def stream(request: Any, context: grpc.aio.ServicerContext,
                             ) -> AsyncIterator[Any]:
                try:
                    async for response in behaviour(request, context):
                        yield response
                except BaseException as exc:
                    await self._map(method, exc, context)
            return stream

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                result = behaviour(request, context)
                return await result if inspect.isawaitable(result) else result
            except BaseException as exc:
                await self._map(method, exc, context)
        return call

    async def _map(self, method: str, exc: BaseException,
                   context: grpc.aio.ServicerContext) -> None:
        if _passes_through(exc):
            raise exc
        code, details, _, trailing = failed(method, exc, self.on_failure)
        await context.abort(code, details, trailing_metadata=trailing)


def failed(method: str, exc: BaseException, on_failure: FailureSink | None) -> Status:
    """status_of(exc), logged where it is a bug and counted: what either face (gRPC here,
    HTTP in rest.py) does with a call's failure before answering it."""
    code, details, reason, trailing = status = status_of(exc)
    if code == grpc.StatusCode.INTERNAL:
        # A bug. Its frames go to the log, not its message: that may quote stored text.
        frames = "".join(traceback.format_tb(exc.__traceback__))
        log.error("%s failed with %s (message withheld)\n%s", method, type(exc).__name__,
                  frames)
    if on_failure is not None:
        on_failure(method, reason)
    return status
