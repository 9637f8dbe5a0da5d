"""Wait until the mesh answers: inference SERVING and every retrieval shard replying."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.errors import ConfigError
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc

Metadata = Sequence[tuple[str, str]]
# Refusals no wait will change: the probe's credentials are wrong, not the mesh slow.
REFUSED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


def bearer(token: str | None) -> Metadata:
    """The authorization metadata of a call with `token`; none without one."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def wait_ready(target: str, timeout_s: float, dead: Callable[[], list[str]],
               logs: Path, metadata: Metadata = ()) -> None:
    """Until inference is SERVING and every retrieval shard answers a probe query.

    The health check needs no credentials; the probe query sends `metadata` (the token of
    an inference with auth configured). `dead()` names processes that will not come up
    (crash-looping): then fail at once, as when inference refuses the probe's token.
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
                if serving and not stub.Query(probe, timeout=5, metadata=metadata).partial:
                    return
            except grpc.RpcError as exc:
                if exc.code() in REFUSED:
                    raise refused(target, exc, bool(metadata)) from exc
                # else not listening yet, or no shard owner yet (UNAVAILABLE)
            if time.monotonic() > deadline:
                raise TimeoutError(f"mesh not ready on {target} after {timeout_s:.0f}s")
            time.sleep(0.5)


def refused(target: str, exc: grpc.RpcError, sent: bool) -> ConfigError:
    """Why inference refused the probe, naming the settings that give it a token."""
    reason = dict(exc.trailing_metadata() or ()).get("streamrag-reason", "")
    what = f"{exc.code().name}{f', {reason}' if reason else ''}"
    fix = ("is it the service account's token (STREAMRAG_INFERENCE_AUTH_TOKEN) or a valid "
           "JWT for STREAMRAG_INFERENCE_JWT_AUDIENCE?" if sent else
           "set it (or STREAMRAG_INFERENCE_AUTH_TOKEN, the service account's token) for an "
           "inference with auth configured")
    return ConfigError(f"STREAMRAG_MESH_INFERENCE_TOKEN: inference at {target} refused the "
                       f"readiness probe ({what}); {fix}")
