"""`streamrag topics` (create the contract's topics) and `streamrag health` (gRPC health)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from services.cli.settings import MeshSettings
from services.cli.status import inference_health
from shared.contract.retention import AuditRetentionSettings
from shared.contract.topics import TOPICS
from shared.errors import InfrastructureError
from shared.kafka.admin import contract_specs, ensure_topics
from shared.settings import KafkaSettings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("topics", help="create every topic of the contract (idempotent)")
    p = sub.add_parser("health", help="exit 0 when the inference service is SERVING")
    p.add_argument("--target", default=None, help="host:port (default: the mesh setting)")


def run_topics(args: argparse.Namespace) -> int:
    retention = AuditRetentionSettings()
    try:
        created = asyncio.run(ensure_topics(KafkaSettings(), contract_specs(retention)))
    except InfrastructureError as exc:  # topics unlike the settings: what to do, one line
        print(f"streamrag topics: {exc}", file=sys.stderr)
        return 1
    print(f"created {len(created)} topics" + (f": {', '.join(created)}" if created else ""))
    evidence = ", ".join(t.name for t in TOPICS if t.evidence)
    print(f"audit evidence ({evidence}) kept {retention.describe()}")
    return 0


def run_health(args: argparse.Namespace) -> int:
    target = args.target or MeshSettings().inference_target
    health = inference_health(target)
    print(f"{target}: {health}")
    return 0 if health == "SERVING" else 1
