"""A second gRPC service process beside the session mesh: wait until it serves, show its log."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.cli.procs import Child
from tests.support.polling import eventually


def log_tail(child: Child, lines: int = 40) -> str:
    return "\n".join(child.log_path.read_text(errors="replace").splitlines()[-lines:])


def wait_serving(target: str, child: Child, timeout_s: float) -> None:
    """Until `target`'s gRPC health says SERVING; the child's log tail when it never does."""
    with grpc.insecure_channel(target) as channel:
        health = health_pb2_grpc.HealthStub(channel)

        def serving() -> bool:
            if not child.alive():
                raise RuntimeError(f"the worker exited:\n{log_tail(child)}")
            try:
                status = health.Check(health_pb2.HealthCheckRequest(), timeout=1).status
            except grpc.RpcError:
                return False  # not listening yet
            return bool(status == health_pb2.HealthCheckResponse.SERVING)
        try:
            eventually(serving, f"SERVING on {target}", timeout_s, 0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{log_tail(child)}") from None
