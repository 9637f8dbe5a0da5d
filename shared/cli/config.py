"""`streamrag config show|set|history|rollback`: the query-path configuration (config.query.v1).

Every version is its own record, keyed query/<version>, so the compacted topic keeps the
whole history; the current configuration is what every inference instance applies: the
newest valid record whose version is above the one before it (services/inference/config/).
`set` and `rollback` write version current+1 after checking it exactly as inference will;
a refused change exits 2 and writes nothing. docs/design/query-config.md has the design.
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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

import grpc
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import ValidationError

from shared.cli.settings import MeshSettings
from shared.contract.codec import encode
from shared.contract.query_config import QueryConfig, check_next, key_of, parse
from shared.contract.topics import CONFIG_QUERY
from shared.errors import InvalidInput
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from shared.settings import KafkaSettings

REFUSED = 2
NOT_APPLIED = 1  # written, but the inference instance asked did not apply it in --wait s
READ_IDLE_S = 0.5  # stop reading once the end offset is reached and nothing came this long


class ConfigLog(Protocol):
    async def read(self) -> list[bytes | None]: ...
    async def write(self, key: bytes, value: bytes) -> None: ...


@dataclass(frozen=True)
class Entry:
    offset: int
    config: QueryConfig | None  # None: refused
    applied: bool
    reason: str = ""


def entries(values: Sequence[bytes | None]) -> list[Entry]:
    """Every record in topic order, applied or refused exactly as inference decides."""
    out, current = [], 0
    for offset, raw in enumerate(values):
        try:
            config = check_next(parse(raw), current)
        except InvalidInput as exc:
            out.append(Entry(offset, None, False, f"{exc.reason} ({exc.field or 'record'})"))
            continue
        current = config.version
        out.append(Entry(offset, config, True))
    return out


def current(values: Sequence[bytes | None]) -> QueryConfig | None:
    applied = [e.config for e in entries(values) if e.config is not None]
    return applied[-1] if applied else None


def parse_value(text: str) -> Any:
    """A knob's value as typed: JSON (3, 0.5, true, "rrf"), else the bare string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def edited(content: dict[str, Any], assignments: Sequence[str],
           removed: Sequence[str]) -> dict[str, Any]:
    """`content` with KNOB=VALUE, VARIANT.weight=N, VARIANT.KNOB=VALUE set (VALUE `null`
    unsets a knob) and the named variants removed."""
    knobs = dict(content.get("knobs") or {})
    variants = {n: {"weight": v["weight"], "overrides": dict(v.get("overrides") or {})}
                for n, v in (content.get("variants") or {}).items()}
    for item in assignments:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InvalidInput("not_an_assignment", item[:64], "write KNOB=VALUE")
        value = parse_value(text)
        variant, dot, knob = name.rpartition(".")
        if not dot:
            knobs[knob] = value
        elif knob == "weight":
            variants.setdefault(variant, {"weight": 0, "overrides": {}})["weight"] = value
        else:
            variants.setdefault(variant, {"weight": 0, "overrides": {}})["overrides"][knob] = value
    for name in removed:
        variants.pop(name, None)
    clean = {k: v for k, v in knobs.items() if v is not None}
    for v in variants.values():
        v["overrides"] = {k: x for k, x in v["overrides"].items() if x is not None}
    return {"knobs": clean, "variants": variants}


def next_record(values: Sequence[bytes | None], content: dict[str, Any], author: str,
                note: str = "", rollback_of: int | None = None,
                now: float | None = None) -> QueryConfig:
    """Version current+1 with `content`, checked as inference will; InvalidInput if refused."""
    base = current(values)
    data = {"version": (base.version if base else 0) + 1, "author": author,
            "at": time.time() if now is None else now, "note": note,
            "rollback_of": rollback_of, **content}
    try:
        return QueryConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}"
                             for e in exc.errors())
        raise InvalidInput("invalid_config", None, problems) from exc


async def set_config(log: ConfigLog, assignments: Sequence[str], removed: Sequence[str],
                     author: str, note: str = "") -> QueryConfig:
    values = await log.read()
    base = current(values)
    content = edited(base.content() if base else {}, assignments, removed)
    return await _write(log, next_record(values, content, author, note))


async def rollback(log: ConfigLog, version: int, author: str, note: str = "") -> QueryConfig:
    values = await log.read()
    found = [e.config for e in entries(values)
             if e.config is not None and e.config.version == version]
    if not found:
        raise InvalidInput("unknown_version", "version", f"no applied version {version}")
    record = next_record(values, found[0].content(), author,
                         note or f"rollback to version {version}", rollback_of=version)
    return await _write(log, record)


async def _write(log: ConfigLog, record: QueryConfig) -> QueryConfig:
    await log.write(key_of(record.version), encode(record))
    return record


class KafkaConfigLog:
    """config.query.v1 on the broker: read whole, written one record at a time."""

    def __init__(self, kafka: KafkaSettings) -> None:
        self.kafka = kafka

    async def read(self) -> list[bytes | None]:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.kafka.bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    fetch_max_wait_ms=self.kafka.query_fetch_max_wait_ms,
                                    **self.kafka.client_options())
        await consumer.start()
        try:
            tp = TopicPartition(CONFIG_QUERY.name, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            values: list[bytes | None] = []
            while True:
                batch = await consumer.getmany(tp, timeout_ms=int(READ_IDLE_S * 1000))
                values.extend(m.value for m in batch.get(tp, []))
                if not batch and await consumer.position(tp) >= end:
                    return values
        finally:
            await consumer.stop()

    async def write(self, key: bytes, value: bytes) -> None:
        # linger 0: one record per batch, so the embedded broker's end offset stays right.
        producer = AIOKafkaProducer(bootstrap_servers=self.kafka.bootstrap, linger_ms=0,
                                    acks="all", **self.kafka.client_options())
        await producer.start()
        try:
            await producer.send_and_wait(CONFIG_QUERY.name, value, key=key)
        finally:
            await producer.stop()


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
    """The configuration version the inference instance at `target` has applied."""
    with grpc.insecure_channel(target) as channel:
        info = inference_pb2_grpc.InferenceStub(channel).Info(inference_pb2.InfoRequest(),
                                                              timeout=5)
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
