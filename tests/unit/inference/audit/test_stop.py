"""The runtime's stop: the after-serving hook (the query audits' last flush) runs once the
gRPC server has answered its last call and before the engine stops; a hook that fails is
logged and the stop goes on. The real flush on a real worker: tests/integration/
test_query_audit_stop.py."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import pytest

from services.inference.runtime import InferenceRuntime
from services.inference.settings import InferenceSettings
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from shared.settings import KafkaSettings
from tests.unit.inference.fakes import FakeSearch, WordEncoder
from tests.unit.inference.serving import CHUNKS, SERVING, until_status


def stopped_in_order(hook_fails: bool) -> tuple[list[str], bool]:
    """The order of the stop's steps, and whether a call made in the hook was refused."""
    order: list[str] = []
    refused: list[bool] = []

    async def go() -> None:
        async def after_serving() -> None:
            order.append("after serving")
            async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
                try:
                    await pb_grpc.InferenceStub(channel).Retrieve(
                        pb.RetrieveRequest(question="disk"), timeout=1)
                    refused.append(False)
                except grpc.aio.AioRpcError:
                    refused.append(True)
            if hook_fails:
                raise RuntimeError("broker gone")

        settings = InferenceSettings(grpc_port=0, grace_s=0.2)
        runtime = InferenceRuntime(settings, KafkaSettings(), search=FakeSearch(CHUNKS),
                                   encoder_factory=WordEncoder, after_serving=after_serving)
        await runtime.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
            await until_status(channel, SERVING)
        server, engine = runtime.server, runtime.engine
        assert server is not None
        server_stop, engine_stop = server.stop, engine.stop

        async def stop_server(grace: Any) -> None:
            await server_stop(grace)
            order.append("server stopped")

        async def stop_engine() -> None:
            order.append("engine stopping")
            await engine_stop()
        server.stop, engine.stop = stop_server, stop_engine  # type: ignore[method-assign]
        await runtime.stop()
    asyncio.run(go())
    return order, refused == [True]


def test_the_hook_runs_after_the_last_answer_and_before_the_engine_stops() -> None:
    order, refused = stopped_in_order(hook_fails=False)
    assert order == ["server stopped", "after serving", "engine stopping"]
    assert refused  # nothing is answered (or recorded) once the hook runs


def test_a_failing_hook_is_logged_and_the_stop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="services.inference.runtime"):
        order, _ = stopped_in_order(hook_fails=True)
    assert order == ["server stopped", "after serving", "engine stopping"]
    assert "query audits were not all sent" in caplog.text
