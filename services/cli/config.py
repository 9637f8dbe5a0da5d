"""`streamrag config show|set|history|rollback`: the query-path configuration (config.query.v1).

Every version is its own record, keyed query/<version>, so the compacted topic keeps the
whole history; the current configuration is what every inference instance applies: the
newest valid record whose version is above the one before it (services/inference/config/).
`set` and `rollback` write version current+1 after checking it exactly as inference will;
a refused change exits 2 and writes nothing (shared/kafka/config_log.py, the writer the SLO
guard uses too). docs/design/query-config.md has the design.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TextIO

import grpc

from services.cli.ready import bearer
from services.cli.settings import MeshSettings
from shared.errors import InvalidInput
from shared.kafka.config_log import (
    ConfigLog,
    Entry,
    KafkaConfigLog,
    current,
    entries,
    rollback,
    set_config,
)
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from shared.settings import KafkaSettings

REFUSED = 2
NOT_APPLIED = 1  # written, but the inference instance asked did not apply it in --wait s


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="the query-path configuration: show, set, history, "
                                      "rollback (applied by inference without a restart)")
    cmd = p.add_subparsers(dest="config_command", required=True)
    cmd.add_parser("show", help="the configuration inference applies now, as JSON")
    s = cmd.add_parser("set", help="write the next version: the current one with changes")
    s.add_argument("assignments", nargs="*", metavar="KNOB=VALUE",
                   help="a base knob (default_top_k=3), a variant's weight (canary.weight=5) "
                        "or override (canary.hybrid=false); VALUE null unsets it")
    s.add_argument("--remove-variant", action="append", default=[], metavar="NAME")
    r = cmd.add_parser("rollback", help="write the next version with version N's content")
    r.add_argument("version", type=int, metavar="N")
    for q in (s, r):
        q.add_argument("--author", default=None, help="default: $USER")
        q.add_argument("--note", default="", help="why (kept with the version)")
        q.add_argument("--wait", type=float, default=0.0, metavar="S",
                       help="then ask inference (Info) until it applies the version, up to S "
                            "seconds; exit 1 if it did not (an instance's own limits, such as "
                            "max_top_k, may refuse what the record allows)")
        q.add_argument("--target", default=None,
                       help="inference gRPC address for --wait (default: the mesh's)")
    cmd.add_parser("history", help="every version with its author and time; refused records")


def run(args: argparse.Namespace, log: ConfigLog | None = None, out: TextIO = sys.stdout,
        ) -> int:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    log = log or KafkaConfigLog(KafkaSettings())
    author = getattr(args, "author", None) or os.environ.get("USER") or getpass.getuser()
    try:
        if args.config_command == "show":
            found = current(asyncio.run(log.read()))
            print(json.dumps(found.model_dump() if found else None, indent=2), file=out)
        elif args.config_command == "history":
            for line in history_lines(entries(asyncio.run(log.read()))):
                print(line, file=out)
        elif args.config_command == "set":
            record = asyncio.run(set_config(log, args.assignments, args.remove_variant, author,
                                            args.note))
            print(f"version {record.version} written by {record.author}", file=out)
            return _waited(args, record.version, out)
        else:
            record = asyncio.run(rollback(log, args.version, author, args.note))
            print(f"version {record.version} written by {record.author} "
                  f"(the content of version {args.version})", file=out)
            return _waited(args, record.version, out)
    except InvalidInput as exc:
        print(f"config {args.config_command}: refused, {exc.reason}"
              f"{f' ({exc.field})' if exc.field else ''}: {exc.detail}", file=sys.stderr)
        return REFUSED
    return 0


def applied_version(target: str) -> int:
    """The configuration version the inference instance at `target` has applied (asked
    with STREAMRAG_MESH_INFERENCE_TOKEN where the API checks tokens)."""
    token = MeshSettings().inference_token
    with grpc.insecure_channel(target) as channel:
        info = inference_pb2_grpc.InferenceStub(channel).Info(
            inference_pb2.InfoRequest(), timeout=5,
            metadata=bearer(token.get_secret_value() if token else None))
    return int(info.config_version)


def _waited(args: argparse.Namespace, version: int, out: TextIO,
            applied: Callable[[str], int] = applied_version) -> int:
    if args.wait <= 0:
        return 0
    target = args.target or MeshSettings().inference_target
    deadline = time.monotonic() + args.wait
    while True:
        try:
            if applied(target) >= version:
                print(f"applied by {target}", file=out)
                return 0
        except grpc.RpcError:
            pass  # not up yet, or restarting: ask again until the deadline
        if time.monotonic() >= deadline:
            print(f"version {version} not applied by {target} within {args.wait:g}s: see "
                  "its log and streamrag_inference_config_refused_total", file=sys.stderr)
            return NOT_APPLIED
        time.sleep(0.2)


def history_lines(items: Sequence[Entry]) -> list[str]:
    lines = []
    for e in items:
        if e.config is None:
            lines.append(f"offset {e.offset}: refused, {e.reason}")
            continue
        c = e.config
        when = datetime.fromtimestamp(c.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        what = f" rollback to {c.rollback_of}" if c.rollback_of is not None else ""
        variants = ", ".join(f"{n} {v.weight}" for n, v in c.variants.items())
        lines.append(f"version {c.version}  {when}  {c.author}{what}"
                     f"{f'  variants: {variants}' if variants else ''}"
                     f"{f'  ({c.note})' if c.note else ''}")
    return lines
