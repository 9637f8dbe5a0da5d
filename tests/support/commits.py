"""Consumer groups' committed offsets, sampled from outside while a mesh runs, and the check
that none of them ever passed an input record whose output was not on the broker yet.

Each sample reads every group's committed offsets first and the output topics' end offsets
after: an output on the broker when an offset was committed lies below those ends. So an
input record below a sampled committed offset must have an output copy (the same doc id and
version) below the end of its output partition, or a dead letter naming its topic, partition
and offset below the dead-letter topic's end; else that commit passed a record that was
neither produced downstream nor dead-lettered. (An output that landed between the two reads
goes unnoticed: the check errs towards passing, never towards a false alarm.)
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from shared.contract.codec import decode
from shared.contract.records import DeadLetter
from shared.contract.topics import DEADLETTER, TopicSpec

TP = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class Flow:
    """A consumer group, the topic it consumes and the topic its outputs go to."""

    group: str
    source: TopicSpec
    output: TopicSpec


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the sampler started
    committed: dict[str, dict[TP, int]]  # group -> {(topic, partition): committed offset}
    ends: dict[TP, int]  # output and dead-letter partitions' end offsets, read after


@dataclass
class Sampler:
    """Samples `groups`' committed offsets and `outputs`' ends every `every_s` in a thread."""

    bootstrap: str
    groups: tuple[str, ...]
    outputs: tuple[TopicSpec, ...]
    every_s: float = 1.0
    samples: list[Sample] = field(default_factory=list)
    failed: int = 0  # samples lost to a busy coordinator
    error: BaseException | None = None  # what stopped the sampler early, if anything
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="commit-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def sampling(self) -> bool:
        """Still sampling; AssertionError naming why it stopped early, if it did."""
        if self.error is not None:
            raise AssertionError(f"the commit sampler stopped: {self.error!r}")
        return self._thread is not None and self._thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # reported by sampling()
            self.error = exc

    async def _run(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        ends = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                enable_auto_commit=False)
        await admin.start()
        await ends.start()
        parts = [TopicPartition(s.name, p) for s in (*self.outputs, DEADLETTER)
                 for p in range(s.partitions)]
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                try:
                    committed = {g: _offsets(await admin.list_consumer_group_offsets(g))
                                 for g in self.groups}
                    end = await ends.end_offsets(parts)
                except (KafkaError, OSError, TimeoutError):
                    self.failed += 1
                else:
                    self.samples.append(Sample(
                        time.monotonic() - started, committed,
                        {(tp.topic, tp.partition): o for tp, o in end.items()}))
                await asyncio.sleep(self.every_s)
        finally:
            await ends.stop()
            await admin.close()


def _offsets(found: dict[Any, Any]) -> dict[TP, int]:
    return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()
            if meta.offset >= 0}


def version_of(value: bytes | None) -> tuple[str, int] | None:
    """(doc id, version) of a record of our topics; None for one that does not parse."""
    try:
        got = json.loads(value or b"")
        return str(got["doc_id"]), int(got["version"])
    except (ValueError, TypeError, KeyError):
        return None


def dead_letters(records: Iterable[Any]) -> list[tuple[TP, int, DeadLetter]]:
    """deadletter.v1's records: (their partition, their offset, the letter)."""
    return [((DEADLETTER.name, r.partition), r.offset, decode(DeadLetter, r.value))
            for r in records]


def passed(flow: Flow, samples: list[Sample], sources: list[Any], outputs: list[Any],
           dead: list[tuple[TP, int, DeadLetter]]) -> list[str]:
    """Every sampled commit of `flow.group` that passed an input record with neither an
    output copy nor a dead letter on the broker at that time: one line per (input
    partition, offset), its first such sample."""
    where: dict[tuple[str, int], list[tuple[TP, int]]] = defaultdict(list)
    for r in outputs:
        key = version_of(r.value)
        if key is not None:
            where[key].append(((r.topic, r.partition), r.offset))
    letters: dict[tuple[str, int, int], list[tuple[TP, int]]] = defaultdict(list)
    for tp, o, d in dead:  # a record replayed is dead-lettered again: each copy counts
        if d.source_topic == flow.source.name:
            letters[(d.source_topic, d.partition, d.offset)].append((tp, o))
    by_part: dict[TP, list[Any]] = defaultdict(list)
    for r in sources:
        by_part[(r.topic, r.partition)].append(r)
    found: dict[tuple[TP, int], str] = {}
    for s in samples:
        for tp, committed in s.committed.get(flow.group, {}).items():
            if tp[0] != flow.source.name:
                continue
            for r in by_part[tp]:
                if r.offset >= committed or (tp, r.offset) in found:
                    continue
                key = version_of(r.value)
                out = any(o < s.ends.get(p, 0) for p, o in where.get(key, [])) if key else False
                copies = letters.get((tp[0], tp[1], r.offset), [])
                if out or any(o < s.ends.get(p, 0) for p, o in copies):
                    continue
                found[(tp, r.offset)] = (
                    f"{flow.group} committed {tp[0]}/{tp[1]}@{committed} at t+{s.at:.1f}s: "
                    f"offset {r.offset} ({key}) had no copy on {flow.output.name} "
                    f"(copies at {where.get(key, []) if key else '-'}, ends then "
                    f"{ {p: e for p, e in s.ends.items() if p[0] == flow.output.name} }) "
                    f"and no dead letter then (letters at {copies}, ends then "
                    f"{ {p: e for p, e in s.ends.items() if p[0] == DEADLETTER.name} })")
    return [found[k] for k in sorted(found)]
