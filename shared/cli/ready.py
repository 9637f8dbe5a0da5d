"""Wait until the mesh answers: inference SERVING and every retrieval shard replying."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc


def wait_ready(target: str, timeout_s: float, dead: Callable[[], list[str]],
               logs: Path) -> None:
    """Until inference is SERVING and every retrieval shard answers a probe query.

    `dead()` names processes that will not come up (crash-looping): then fail at once.
    """
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        stub = inference_pb2_grpc.InferenceStub(channel)
        while True:
            if dead():
                raise RuntimeError(f"{', '.join(dead())} kept exiting; see {logs}")
            try:
                serving = health.Check(health_pb2.HealthCheckRequest(), timeout=1).status \
                    == health_pb2.HealthCheckResponse.SERVING
                # One new token: with a generator configured, the probe is about
                # retrieval; a full answer on a CPU could outlast the probe's timeout.
                probe = inference_pb2.QueryRequest(question="ready?", max_new_tokens=1,
                                                   answer_mode="extractive")
                if serving and not stub.Query(probe, timeout=5).partial:
                    return
            except grpc.RpcError:
                pass  # not listening yet, or no shard owner yet (UNAVAILABLE)
            if time.monotonic() > deadline:
                raise TimeoutError(f"mesh not ready on {target} after {timeout_s:.0f}s")
            time.sleep(0.5)
