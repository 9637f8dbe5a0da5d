"""The Inference gRPC API: status codes with reasons, deadlines, health and reflection."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import NoReturn

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import SERVICE_NAME as HEALTH_SERVICE
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection

from services.inference import convert
from services.inference.engine import QueryEngine, Retrieval
from services.inference.params import QueryParams
from shared.errors import InfrastructureError, InvalidInput
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Inference"].full_name
# The share of a caller's remaining deadline the gather may use; the rest is for the
# answer step and the reply, so a slow shard costs a partial answer, not a timeout.
GATHER_SHARE = 0.75


class InferenceServicer(pb_grpc.InferenceServicer):
    def __init__(self, engine: QueryEngine) -> None:
        self.engine = engine

    async def Query(self, request: pb.QueryRequest,
                    context: grpc.aio.ServicerContext) -> pb.QueryResponse:
        retrieval = await self._retrieve(await self._params(request, context), context)
        return convert.query_response(retrieval, await self.engine.answer(retrieval))

    async def StreamQuery(self, request: pb.QueryRequest, context: grpc.aio.ServicerContext,
                          ) -> AsyncIterator[pb.StreamQueryResponse]:
        retrieval = await self._retrieve(await self._params(request, context), context)
        yield convert.stream_start(retrieval)  # citations first: the reader sees sources early
        answer = await self.engine.answer(retrieval)
        for piece in answer.pieces:
            yield pb.StreamQueryResponse(delta=piece)
        yield convert.stream_end(retrieval, answer)

    async def Info(self, request: pb.InfoRequest,
                   context: grpc.aio.ServicerContext) -> pb.InfoResponse:
        return convert.info(self.engine, self.engine.search.partitions)

    async def _params(self, request: pb.QueryRequest,
                      context: grpc.aio.ServicerContext) -> QueryParams:
        try:
            return convert.params(request, self.engine.settings, time.time())
        except InvalidInput as exc:
            field = exc.field or "request"
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                         f"invalid {field} ({exc.reason}): {exc.detail}",
                         (("streamrag-field", field), ("streamrag-reason", exc.reason)))

    async def _retrieve(self, params: QueryParams,
                        context: grpc.aio.ServicerContext) -> Retrieval:
        remaining = context.time_remaining()
        budget = self.engine.settings.shard_timeout_s
        if remaining is not None:
            if remaining <= 0:
                await _abort(context, grpc.StatusCode.DEADLINE_EXCEEDED, "deadline already passed")
            budget = min(budget, remaining * GATHER_SHARE)
        try:
            return await self.engine.retrieve(params, budget)
        except InfrastructureError as exc:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))


async def _abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, details: str,
                 trailing: tuple[tuple[str, str], ...] = ()) -> NoReturn:
    await context.abort(code, details, trailing_metadata=trailing)
    raise AssertionError("context.abort returned")  # it always raises; this satisfies NoReturn


def build_server(engine: QueryEngine, health: health_aio.HealthServicer, host: str,
                 port: int) -> tuple[grpc.aio.Server, int]:
    """The server with Inference, Health and reflection, bound (port 0 picks a free one)."""
    server = grpc.aio.server()
    pb_grpc.add_InferenceServicer_to_server(InferenceServicer(engine), server)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = (SERVICE_NAME, HEALTH_SERVICE, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    return server, bound


async def set_serving(health: health_aio.HealthServicer, serving: bool) -> None:
    """Set the overall ("") and the Inference service's health together."""
    status = (health_pb2.HealthCheckResponse.SERVING if serving
              else health_pb2.HealthCheckResponse.NOT_SERVING)
    for name in ("", SERVICE_NAME):
        await health.set(name, status)
