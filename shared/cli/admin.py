"""`streamrag topics` (create the contract's topics) and `streamrag health` (gRPC health)."""

from __future__ import annotations

import argparse
import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.admin import ensure_topics
from shared.cli.settings import MeshSettings
from shared.settings import KafkaSettings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("topics", help="create every topic of the contract (idempotent)")
    p = sub.add_parser("health", help="exit 0 when the inference service is SERVING")
    p.add_argument("--target", default=None, help="host:port (default: the mesh setting)")


def run_topics(args: argparse.Namespace) -> int:
    created = asyncio.run(ensure_topics(KafkaSettings()))
    print(f"created {len(created)} topics" + (f": {', '.join(created)}" if created else ""))
    return 0


def run_health(args: argparse.Namespace) -> int:
    target = args.target or MeshSettings().inference_target
    with grpc.insecure_channel(target) as channel:
        try:
            resp = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                             timeout=3)
        except grpc.RpcError as exc:
            print(f"{target}: {exc.code().name}")
            return 1
    print(f"{target}: {health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)}")
    return 0 if resp.status == health_pb2.HealthCheckResponse.SERVING else 1
