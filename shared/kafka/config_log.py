"""config.query.v1 as a log of versions: read it, compute the current one, write the next.

The one writer of configuration versions: `streamrag config set|rollback` (services/cli/
config.py) and inference's SLO guard both call `set_config` and `rollback`, so a guard's
action is checked, numbered and recorded exactly as a person's. The current configuration
is what every inference instance applies: the newest valid record whose version is above
the one before it (services/inference/config/).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import ValidationError

from shared.contract.codec import encode
from shared.contract.query_config import QueryConfig, check_next, key_of, parse
from shared.contract.topics import CONFIG_QUERY
from shared.errors import InvalidInput
from shared.settings import KafkaSettings

READ_POLL_S = 0.5  # the longest one fetch of the log waits


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
            while await consumer.position(tp) < end:
                batch = await consumer.getmany(tp, timeout_ms=int(READ_POLL_S * 1000))
                values.extend(m.value for m in batch.get(tp, []) if m.offset < end)
            return values
        finally:
            await consumer.stop()

    async def write(self, key: bytes, value: bytes) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.kafka.bootstrap,
                                    **self.kafka.producer_options(), **self.kafka.client_options())
        await producer.start()
        try:
            await producer.send_and_wait(CONFIG_QUERY.name, value, key=key)
        finally:
            await producer.stop()
