"""The embedded broker's memory made durable: every record of every topic, and every
consumer group's committed offsets, journaled to local files and replayed into a fresh
broker at the same offsets.

The embedded broker (Tansu) keeps topics in memory only, and its build has no local-disk
storage engine (its S3 engine works against a local S3 server that honours conditional
writes, but every fetch lists every stored batch of the partition, so reads slow down as
the log grows: see docs/durability.md). So `streamrag up` runs this journal beside it:

- **tail** (the `journal` process): a plain consumer (no group) assigned to every
  partition of every topic reads each record once and appends it to
  `<dir>/topics/<topic>/<partition>.log` (frames with their offset, timestamp, key,
  value, headers and a CRC, fsynced every `flush_s`); new topics are picked up as they
  appear. Every `groups_s` it reads the committed offsets of every consumer group, then
  the end offsets, and persists the offsets (`groups.json`) only once the journal holds
  every record up to those ends: an offset on disk never passes a record the journal
  lacks, so a replay re-processes, never skips (every stage is idempotent for replays).
- **restore**: into an empty broker, each partition's records are produced in order with
  their own key, value, timestamp and headers, which gives them their original offsets
  (read back and checked record by record); then each group's offsets are committed.

What is kept: everything a worker kill, a graceful stop or a kill -9 of every process
leaves behind. What can be lost: records the broker acknowledged in the last moments
before the broker process itself died, which the journal had not read yet (one fetch wait:
50 ms while traffic flows, the idle wait of 500 ms for the first record after a quiet
spell, as every worker's); the groups' offsets on disk never pass them, so whatever the
mesh derived from records it still has is derived again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from shared.contract.topics import all_topic_specs
from shared.kafka import patches
from shared.kafka.admin import commit_offsets, ensure_topics
from shared.settings import KafkaSettings

log = logging.getLogger("streamrag.journal")
_HEAD = struct.Struct(">QqiiH")  # offset, timestamp ms, key length (-1: none), value length
_NAME = struct.Struct(">H")  # (-1: none), header count; then key, value, headers, CRC32
_LEN = struct.Struct(">i")
_CRC = struct.Struct(">I")
GROUPS_FILE = "groups.json"
TOPICS_FILE = "topics.json"


@dataclass(frozen=True)
class Frame:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def encode_frame(f: Frame) -> bytes:
    parts = [_HEAD.pack(f.offset, f.timestamp_ms, -1 if f.key is None else len(f.key),
                        -1 if f.value is None else len(f.value), len(f.headers)),
             f.key or b"", f.value or b""]
    for name, value in f.headers:
        raw = name.encode()
        parts += [_NAME.pack(len(raw)), raw, _LEN.pack(len(value)), value]
    body = b"".join(parts)
    return body + _CRC.pack(zlib.crc32(body))


def read_frames(path: Path) -> Iterator[tuple[Frame, int]]:
    """(frame, end position) of each whole frame; stops at a torn or corrupt tail."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + _HEAD.size <= len(data):
        try:
            offset, ts, klen, vlen, nh = _HEAD.unpack_from(data, pos)
            at = pos + _HEAD.size
            key = None if klen < 0 else data[at:at + klen]
            at += max(klen, 0)
            value = None if vlen < 0 else data[at:at + vlen]
            at += max(vlen, 0)
            headers = []
            for _ in range(nh):
                (n,) = _NAME.unpack_from(data, at)
                name = data[at + 2:at + 2 + n].decode()
                at += 2 + n
                (m,) = _LEN.unpack_from(data, at)
                headers.append((name, data[at + 4:at + 4 + m]))
                at += 4 + m
            (crc,) = _CRC.unpack_from(data, at)
        except (struct.error, UnicodeDecodeError):
            return
        if at > len(data) or zlib.crc32(data[pos:at]) != crc:
            return
        pos = at + _CRC.size
        yield Frame(offset, ts, key, value, tuple(headers)), pos


class Journal:
    """The journal directory: one append-only file per topic partition."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: dict[TopicPartition, IO[bytes]] = {}
        self._next: dict[TopicPartition, int] = {}

    def path(self, tp: TopicPartition) -> Path:
        return self.root / "topics" / tp.topic / f"{tp.partition}.log"

    def partitions(self) -> dict[str, int]:
        """{topic: partition count} as journaled."""
        file = self.root / TOPICS_FILE
        return json.loads(file.read_text()) if file.exists() else {}

    def note_topics(self, counts: dict[str, int]) -> None:
        if counts != self.partitions():
            _write_atomic(self.root / TOPICS_FILE, json.dumps(counts, sort_keys=True))

    def has_records(self) -> bool:
        return any(p.stat().st_size > 0 for p in (self.root / "topics").glob("*/*.log"))

    def next_offset(self, tp: TopicPartition) -> int:
        """The offset after the last whole frame (opening the file cuts a torn tail)."""
        if tp not in self._next:
            path = self.path(tp)
            path.parent.mkdir(parents=True, exist_ok=True)
            last, whole = -1, 0
            if path.exists():
                for frame, at in read_frames(path):
                    last, whole = frame.offset, at
                with open(path, "r+b") as f:
                    f.truncate(whole)  # a frame torn by a kill mid-write
            self._next[tp] = last + 1
            self._files[tp] = open(path, "ab")  # noqa: SIM115 - kept open while tailing
        return self._next[tp]

    def append(self, tp: TopicPartition, record: Any) -> None:
        if record.offset < self.next_offset(tp):
            return  # already journaled (a re-fetch after a reassignment)
        frame = Frame(record.offset, record.timestamp, record.key, record.value,
                      tuple((n, bytes(v)) for n, v in record.headers or ()))
        self._files[tp].write(encode_frame(frame))
        self._next[tp] = record.offset + 1

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()
            os.fsync(f.fileno())

    def save_groups(self, groups: dict[str, list[tuple[str, int, int]]]) -> None:
        self.flush()
        _write_atomic(self.root / GROUPS_FILE, json.dumps(groups, sort_keys=True))

    def groups(self) -> dict[str, list[tuple[str, int, int]]]:
        file = self.root / GROUPS_FILE
        if not file.exists():
            return {}
        return {g: [(t, int(p), int(o)) for t, p, o in rows]
                for g, rows in json.loads(file.read_text()).items()}

    def close(self) -> None:
        self.flush()
        for f in self._files.values():
            f.close()
        self._files.clear()


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


async def _topic_counts(admin: AIOKafkaAdminClient) -> dict[str, int]:
    names = [t for t in await admin.list_topics() if not t.startswith("__")]
    if not names:
        return {}
    return {m["topic"]: len(m["partitions"]) for m in await admin.describe_topics(names)}


class _GroupReaders:
    """One offset reader per consumer group, kept for the journal's life: starting a client
    per group every round cost a connection and a coordinator lookup each time."""

    def __init__(self, kafka: KafkaSettings) -> None:
        self.kafka = kafka
        self.readers: dict[str, AIOKafkaConsumer] = {}

    async def committed(self, groups: list[str], tps: list[TopicPartition],
                        ) -> dict[str, list[tuple[str, int, int]]]:
        out: dict[str, list[tuple[str, int, int]]] = {}
        for group in groups:
            reader = self.readers.get(group)
            if reader is None:
                reader = AIOKafkaConsumer(bootstrap_servers=self.kafka.bootstrap,
                                          group_id=group, enable_auto_commit=False,
                                          **self.kafka.client_options())
                await reader.start()
                self.readers[group] = reader
            # One OffsetFetch for every partition (the public committed() asks one by one).
            got = await reader._coordinator.fetch_committed_offsets(set(tps))
            rows = sorted((tp.topic, tp.partition, meta.offset) for tp, meta in got.items()
                          if meta.offset >= 0)
            if rows:
                out[group] = rows
        return out

    async def close(self) -> None:
        for reader in self.readers.values():
            await reader.stop()
        self.readers.clear()


async def tail(kafka: KafkaSettings, journal: Journal, stop: asyncio.Event, *,
               flush_s: float = 0.2, groups_s: float = 2.0, topics_s: float = 5.0) -> None:
    """Journal every record and the groups' offsets until `stop`; then catch up once more."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options())
    await admin.start()
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False,
                                fetch_max_wait_ms=kafka.fetch_max_wait_ms,
                                max_partition_fetch_bytes=kafka.max_record_bytes,
                                fetch_max_bytes=kafka.max_record_bytes,
                                **kafka.client_options())
    await consumer.start()
    readers = _GroupReaders(kafka)
    loop = asyncio.get_running_loop()
    assigned: set[TopicPartition] = set()
    pending: tuple[dict[str, list[tuple[str, int, int]]], dict[TopicPartition, int]] | None = None
    next_topics = next_flush = next_groups = loop.time()
    final = False  # the last round after `stop`: fresh topics and offsets, then return
    try:
        while True:
            now = loop.time()
            stopping = stop.is_set()
            if stopping and not final:
                final, pending, next_topics, next_groups = True, None, now, now
                if not assigned and not journal.partitions():
                    return
            if now >= next_topics:
                counts = await _topic_counts(admin)
                journal.note_topics({**journal.partitions(), **counts})
                wanted = {TopicPartition(t, p) for t, n in counts.items() for p in range(n)}
                if wanted != assigned:
                    consumer.assign(sorted(wanted, key=lambda tp: (tp.topic, tp.partition)))
                    for tp in wanted:
                        consumer.seek(tp, journal.next_offset(tp))
                    assigned = wanted
                next_topics = now + topics_s
            if now >= next_groups and pending is None and assigned:
                groups = [g for g, _ in await admin.list_consumer_groups()]
                offsets = await readers.committed(groups, sorted(assigned))
                pending = offsets, await consumer.end_offsets(sorted(assigned))
                next_groups = now + groups_s
            batch = await consumer.getmany(timeout_ms=100) if assigned else {}
            for tp, records in batch.items():
                for record in records:
                    journal.append(tp, record)
            if pending is not None and all(journal.next_offset(tp) >= end
                                           for tp, end in pending[1].items()):
                journal.save_groups(pending[0])  # flushes the records first
                pending = None
                if stopping:
                    return
            if loop.time() >= next_flush:
                journal.flush()
                next_flush = loop.time() + flush_s
    finally:
        journal.close()
        await readers.close()
        await consumer.stop()
        await admin.close()


@dataclass(frozen=True)
class Restored:
    records: int
    partitions: int
    groups: int


async def restore(kafka: KafkaSettings, journal: Journal) -> Restored:
    """Replay the journal into a broker whose journaled partitions are empty."""
    counts = journal.partitions()
    await ensure_topics(kafka)
    contract = {s.name for s in all_topic_specs()}
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        extra = [NewTopic(t, n, kafka.replication_factor) for t, n in counts.items()
                 if t not in existing and t not in contract]
        if extra:
            await admin.create_topics(extra)
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5,
                                max_request_size=kafka.max_record_bytes,
                                **kafka.producer_options(), **kafka.client_options())
    await producer.start()
    records = parts = 0
    ends: dict[TopicPartition, int] = {}
    try:
        for topic, n in sorted(counts.items()):
            for p in range(n):
                tp = TopicPartition(topic, p)
                if not journal.path(tp).exists():
                    continue
                done = await _replay(producer, tp, journal.path(tp))
                records += done
                parts += 1 if done else 0
                ends[tp] = done
    finally:
        await producer.stop()
    await _check(kafka, journal, [tp for tp, n in ends.items() if n])
    groups = journal.groups()
    for group, rows in groups.items():
        await commit_offsets(kafka, group, {
            TopicPartition(t, p): min(o, ends.get(TopicPartition(t, p), 0)) for t, p, o in rows})
    return Restored(records, parts, len(groups))


async def _replay(producer: AIOKafkaProducer, tp: TopicPartition, path: Path) -> int:
    """Produce a partition's frames in order (the embedded broker's produce responses give
    no trustworthy offsets for batched records: `_check` reads them back)."""
    futures: list[Any] = []
    count = 0
    for frame, _ in read_frames(path):
        futures.append(await producer.send(
            tp.topic, frame.value, key=frame.key, partition=tp.partition,
            timestamp_ms=frame.timestamp_ms, headers=list(frame.headers)))
        count += 1
        if len(futures) >= 1000:
            await asyncio.gather(*futures)
            futures.clear()
    await asyncio.gather(*futures)
    return count


def _digest(offset: int, key: bytes | None, value: bytes | None) -> tuple[int, int]:
    return offset, zlib.crc32((key or b"") + b"\0" + (value or b""))


async def _check(kafka: KafkaSettings, journal: Journal, tps: list[TopicPartition]) -> None:
    """Every restored record is at its journaled offset with its key and value."""
    want = {tp: [_digest(f.offset, f.key, f.value) for f, _ in read_frames(journal.path(tp))]
            for tp in tps}
    got: dict[TopicPartition, list[tuple[int, int]]] = {tp: [] for tp in tps}
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                              enable_auto_commit=False, fetch_max_wait_ms=10,
                              max_partition_fetch_bytes=kafka.max_record_bytes,
                              fetch_max_bytes=kafka.max_record_bytes, **kafka.client_options())
    await reader.start()
    try:
        reader.assign(tps)
        await reader.seek_to_beginning(*tps)
        idle = 0
        while any(len(got[tp]) < len(want[tp]) for tp in tps) and idle < 50:
            batch = await reader.getmany(timeout_ms=100)
            idle = 0 if batch else idle + 1
            for tp, records in batch.items():
                got[tp] += [_digest(r.offset, r.key, r.value) for r in records]
    finally:
        await reader.stop()
    for tp in tps:
        if got[tp] != want[tp]:
            where = next((i for i, (g, w) in enumerate(zip(got[tp], want[tp], strict=False))
                          if g != w), min(len(got[tp]), len(want[tp])))
            msg = (f"{tp.topic}[{tp.partition}]: restored log differs from the journal at "
                   f"record {where} ({len(got[tp])} read back, {len(want[tp])} journaled); "
                   "was the broker empty?")
            raise RuntimeError(msg)


def main() -> None:
    """`python -m shared.cli.journal DIR`: journal the broker until SIGTERM, then catch up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
        journal = Journal(args.dir)
        kafka = KafkaSettings()
        patches.install_idle_wait(kafka)  # idle, wait long as every worker does: cheap
        log.info("journaling %s into %s", kafka.bootstrap, args.dir)
        await tail(kafka, journal, stop)
        log.info("journal caught up and closed")

    asyncio.run(run())


if __name__ == "__main__":
    main()
