"""Growing a running mesh from 4 to 6 document partitions on the embedded Apache Kafka, as an
operator does it: `streamrag up` (one process), documents with several versions, a grow
refused while the mesh runs, the mesh stopped, `streamrag topics --grow 6`, and `streamrag up`
again with STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS=6 on the same run directory.

Afterwards: the broker describes every grown topic with 6 partitions and the others as they
were; every old record is at its partition and offset and every group's committed offsets
are as they were (CreatePartitions moves nothing), but for the groups moved past the
re-home writes on chunks.v1; every document answers exactly once at its newest version; the
per-document state moved with the documents (the changelog and the shard log hold each
document's newest record on its new partition only, and an old version sent again is
refused as stale); a new version of a moved document lands on its new partition and is
applied; new documents land on the new partitions and are found. The broker is the test's
own: the session meshes cannot be stopped.

And a growth that crashes part-way (after growing some topics, after saving the changelog's
records and deleting it, half-way through re-homing) finishes when run again: old records
at their offsets, the group's offsets as they were, each key's newest record on its new
partition."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from services.cli.mesh import Endpoints, free_port, spawn_broker
from services.cli.procs import stop
from services.cli.topics import grow_mesh, topic_counts
from shared.contract.codec import encode
from shared.contract.records import EmbeddedChunkSet
from shared.contract.topics import all_topic_specs
from shared.errors import InvalidInput
from shared.kafka.admin import ensure_topics
from shared.kafka.grow import GROWN, Rec, Retire, partition_of, retired, table_key
from shared.settings import KafkaSettings
from tests.support.mesh import MESH_ENV, chunks_of, read_topic, uid
from tests.support.polling import eventually

# Its own broker and mesh: it runs beside the session mesh's tests, the shorter group.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.suite_group("mesh")]
ROOT = Path(__file__).resolve().parents[2]
OLD, NEW = 4, 6
CHANGELOG = "streamrag-ingest-doc_versions-changelog"


def ids_where(run: str, want: int, keep: Any) -> list[str]:
    found = (f"{run}-{i}" for i in range(10_000))
    return [d for d, _ in zip((d for d in found if keep(d.encode())), range(want), strict=False)]


def moves(key: bytes) -> bool:
    return partition_of(key, OLD) != partition_of(key, NEW)


def doc(doc_id: str, version: int, note: str = "") -> bytes:
    return json.dumps({"id": doc_id, "source": "grow", "version": version,
                       "text": f"The quillwort harbour log {doc_id} records revision {version} "
                               f"of the tide tables.{note}"}).encode()


def produce(mesh: Endpoints, docs: list[tuple[str, int]], note: str = "") -> None:
    """To docs.raw.v1 keyed by doc id, so each document's versions arrive in order."""
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap)
        await producer.start()
        try:
            for doc_id, version in docs:
                await producer.send_and_wait("docs.raw.v1", doc(doc_id, version, note),
                                             key=doc_id.encode())
        finally:
            await producer.stop()
    asyncio.run(go())


def question(doc_id: str) -> str:
    return f"quillwort harbour log {doc_id} tide tables"


class Up:
    """`streamrag up --no-demo` in its own process, on a given broker and run directory."""

    def __init__(self, tmp: Path, broker: str, run_dir: Path, extra: dict[str, str]) -> None:
        grpc_port = free_port()
        self.endpoints = Endpoints(broker, f"http://127.0.0.1:{free_port()}",
                                   f"127.0.0.1:{grpc_port}", run_dir)
        self.env = {**os.environ, **MESH_ENV, **extra, "PYTHONUNBUFFERED": "1",
                    "STREAMRAG_KAFKA_BOOTSTRAP": broker,
                    "STREAMRAG_LEDGER_RPC_URL": self.endpoints.rpc_url,
                    "STREAMRAG_MESH_RUN_DIR": str(run_dir),
                    "STREAMRAG_MESH_ANVIL_BIN": str(ROOT / ".tools/node_modules/.bin/anvil"),
                    "STREAMRAG_MESH_INFERENCE_TARGET": self.endpoints.grpc_target,
                    "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port),
                    # not up's 8080: the suite's groups run side by side
                    "STREAMRAG_MESH_INFERENCE_HTTP_PORT": str(free_port()),
                    "STREAMRAG_MESH_INFERENCE_MCP_PORT": str(free_port())}
        self.log = tmp / f"up-{grpc_port}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli.main", "up", "--no-demo"], cwd=ROOT,
                env=self.env, stdout=out, stderr=subprocess.STDOUT)
        eventually(self._ready, "the mesh ready", 300, 1.0)

    def _ready(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        return "mesh running" in self.log.read_text()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(120) == 0, self.log.read_text()[-3000:]


def streamrag_topics(broker: str, run_dir: Path, *args: str) -> tuple[int, str]:
    """`streamrag topics ARGS` as an operator runs it beside the stopped mesh."""
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "topics", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": broker,
                               "STREAMRAG_MESH_RUN_DIR": str(run_dir)})
    return done.returncode, done.stdout + done.stderr


def until_quiet(broker: str, run_dir: Path, *args: str) -> tuple[int, str]:
    """`streamrag topics ARGS` again while it is refused only for members still listed, as
    the operator is told to: a worker that stopped without leaving its group counts until
    its session times out."""
    deadline = time.monotonic() + 3 * KafkaSettings().session_timeout_s
    while True:
        code, out = streamrag_topics(broker, run_dir, *args)
        refused = [line for line in out.splitlines() if line.startswith("  ")]
        if code != 1 or time.monotonic() > deadline or \
                not all("live member(s)" in line for line in refused):
            return code, out
        time.sleep(1)


def versions_found(mesh: Endpoints, doc_id: str) -> list[tuple[str, int]]:
    return [(c.chunk_id, c.version) for c in chunks_of(mesh, question(doc_id), doc_id)]


def answers_once_at(mesh: Endpoints, doc_id: str, version: int) -> bool:
    """The document's chunks are found, each once, all of `version`."""
    found = versions_found(mesh, doc_id)
    ids = [c for c, _ in found]
    return bool(found) and len(ids) == len(set(ids)) and {v for _, v in found} == {version}


def refusals(mesh: Endpoints, run: str) -> set[tuple[str, str]]:
    out = set()
    for r in read_topic(mesh, "deadletter.v1"):
        letter = json.loads(r.value)
        if (letter.get("key") or "").startswith(f"{run}-"):
            out.add((letter["key"], letter["reason"]))
    return out


def newest_live(mesh: Endpoints, topic: str, run: str, how: Retire,
                routing: Any) -> dict[str, set[int]]:
    """Per document of the run: the partitions whose newest record of its key is live."""
    newest: dict[tuple[bytes, int], Any] = {}
    for r in read_topic(mesh, topic):
        if r.key is not None and routing(r.key).decode().startswith(f"{run}-"):
            newest[r.key, r.partition] = r
    out: dict[str, set[int]] = {}
    for (key, p), r in newest.items():
        live = not retired(Rec(p, r.offset, key, r.value), how)
        out.setdefault(routing(key).decode(), set()).update({p} if live else set())
    return out


def kafka_of(broker: str) -> KafkaSettings:
    return KafkaSettings(bootstrap=broker)


def counts_of(broker: str) -> dict[str, int]:
    """Partitions per topic, as the broker describes them."""
    return asyncio.run(topic_counts(kafka_of(broker)))


def group_offsets(broker: str) -> dict[str, dict[tuple[str, int], int]]:
    """Every group's committed offsets on the grown topics."""
    async def go() -> dict[str, dict[tuple[str, int], int]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker)
        await admin.start()
        try:
            out = {}
            for group, _ in await admin.list_consumer_groups():
                got = await admin.list_consumer_group_offsets(group)
                out[group] = {(tp.topic, tp.partition): meta.offset for tp, meta in got.items()
                              if tp.topic in GROWN and meta.offset >= 0}
            return out
        finally:
            await admin.close()
    return asyncio.run(go())


def end_offsets(broker: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    async def go() -> dict[tuple[str, int], int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker, group_id=None)
        await consumer.start()
        try:
            ends = await consumer.end_offsets([TopicPartition(topic, p)
                                               for p in range(partitions)])
        finally:
            await consumer.stop()
        return {(tp.topic, tp.partition): o for tp, o in ends.items()}
    return asyncio.run(go())


def placed(records: list[Any]) -> dict[tuple[int, int], tuple[bytes | None, bytes | None]]:
    return {(r.partition, r.offset): (r.key, r.value) for r in records}


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    child = spawn_broker("127.0.0.1", port, tmp_path / "broker")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop([child], 15)


def test_grow_four_to_six_keeps_order_and_index(tmp_path: Path, own_broker: str) -> None:
    run, run_dir = uid("grow"), tmp_path / "run"
    state = ["--state-dir", str(tmp_path / "grow")]
    moved = ids_where(run, 4, moves)  # versions 1..3 each
    stayed = ids_where(run + "s", 2, lambda k: not moves(k))
    assert len(moved) == 4 and len(stayed) == 2

    first = Up(tmp_path, own_broker, run_dir, {})
    mesh = first.endpoints
    produce(mesh, [(d, v) for v in (1, 2, 3) for d in moved] + [(d, 1) for d in stayed])
    for d in moved:
        eventually(lambda d=d: answers_once_at(mesh, d, 3), f"{d} at version 3", 180)
    for d in stayed:
        eventually(lambda d=d: answers_once_at(mesh, d, 1), f"{d} at version 1", 60)
    assert refusals(mesh, run) == set()  # keyed input: every version arrived in order
    code, out = streamrag_topics(own_broker, run_dir, "--grow", str(NEW), *state)
    assert code == 1 and re.search(r"worker onebox \(pid \d+, .*\) is running: stop the "
                                   r"mesh", out), out
    assert re.search(r"group \S+ has \d+ live member\(s\)", out), out
    first.stop()

    code, out = until_quiet(own_broker, run_dir, "--grow", str(NEW), "--dry-run", *state)
    assert code == 0, out
    assert "plan: docs.parsed.v1: 4 -> 6" in out and "plan: audit.batches.v1" not in out, out
    every = len(moved) + len(stayed)
    assert f"plan: {CHANGELOG}: re-created holding {every} key(s), {len(moved)} of them on a " \
        "new partition" in out, out
    before_counts, before_offsets = counts_of(own_broker), group_offsets(own_broker)
    assert {t: before_counts[t] for t in GROWN} == dict.fromkeys(GROWN, OLD)
    readers = {g for g, got in before_offsets.items() if any(t == "chunks.v1" for t, _ in got)}
    assert readers and any(t == "docs.normalized.v1" for got in before_offsets.values()
                           for t, _ in got), before_offsets
    normalized = placed(read_topic(mesh, "docs.normalized.v1"))
    assert len(normalized) >= 3 * len(moved) + len(stayed)

    code, out = streamrag_topics(own_broker, run_dir, "--grow", str(NEW), *state)
    assert code == 0, out
    for topic in set(GROWN) - {CHANGELOG}:
        assert f"\n{topic}: 4 -> 6 partitions\n" in f"\n{out}", out  # CreatePartitions
    for topic in ("chunks.embedded.v1", "chunks.v1"):
        assert re.search(rf"^{re.escape(topic)}: {len(moved)} key\(s\) re-homed, "
                         rf"{len(moved)} retired", out, re.M), out
    assert f"{CHANGELOG}: re-created with 6 partitions, each key's newest record once on its " \
        f"partition: {every} key(s), {len(moved)} moved" in out, out
    assert not (tmp_path / "grow" / "grow.json").exists()  # finished: nothing to resume
    assert list((tmp_path / "grow").iterdir()) == []  # the saved records removed too

    # The broker describes every grown topic with 6 partitions, the others as they were.
    after_counts = counts_of(own_broker)
    assert {t: after_counts[t] for t in GROWN} == dict.fromkeys(GROWN, NEW)
    others = {s.name for s in all_topic_specs()} - set(GROWN)
    assert {t: after_counts.get(t) for t in others} == {t: before_counts.get(t) for t in others}
    # Nothing moved: the old records at their offsets (audit chains are named by them), and
    # every group's offsets as they were; the chunks.v1 readers past the re-home writes.
    assert placed(read_topic(mesh, "docs.normalized.v1")) == normalized
    after_offsets = group_offsets(own_broker)
    chunk_ends = end_offsets(own_broker, "chunks.v1", NEW)
    for group, got in before_offsets.items():
        kept = {tp: o for tp, o in got.items() if tp[0] != "chunks.v1"}
        assert {tp: after_offsets[group].get(tp) for tp in kept} == kept, group
        if group in readers:
            assert {tp: o for tp, o in after_offsets[group].items()
                    if tp[0] == "chunks.v1"} == chunk_ends, group
    code, again = streamrag_topics(own_broker, run_dir, "--grow", str(NEW), *state)
    assert code == 0 and "-> 6 partitions" not in again, again  # idempotent
    for topic in ("chunks.embedded.v1", "chunks.v1"):
        assert f"{topic}: 0 key(s) re-homed, 0 retired" in again, again

    # Each document's newest state and shard record now sit only on its new partition.
    expect = {d: {partition_of(d.encode(), NEW)} for d in moved + stayed}
    assert newest_live(mesh, CHANGELOG, run, "tombstone", table_key) | \
        newest_live(mesh, CHANGELOG, run + "s", "tombstone", table_key) == expect
    assert newest_live(mesh, "chunks.embedded.v1", run, "delete", lambda k: k) | \
        newest_live(mesh, "chunks.embedded.v1", run + "s", "delete", lambda k: k) == expect
    changelog = [r for r in read_topic(mesh, CHANGELOG)
                 if r.key is not None and table_key(r.key).decode() in expect]
    assert sorted(table_key(r.key).decode() for r in changelog) == sorted(expect)  # once each

    second = Up(tmp_path, own_broker, run_dir, {"STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS": "6"})
    mesh = second.endpoints
    try:
        # (a) every document exactly once, at its newest version
        for d in moved:
            eventually(lambda d=d: answers_once_at(mesh, d, 3), f"{d} once at 3", 120)
        for d in stayed:
            eventually(lambda d=d: answers_once_at(mesh, d, 1), f"{d} once at 1", 60)
        # (b) a new version of a moved document applies on its new partition; old versions
        # are still stale
        fresh = ids_where(run + "n", 2, lambda k: partition_of(k, NEW) >= OLD)
        produce(mesh, [(moved[0], 4)] + [(d, 1) for d in fresh])
        # Old versions with other content than was applied (a replay of what was applied
        # would be dropped as a duplicate): refused only if the document's state moved.
        produce(mesh, [(moved[0], 2), (moved[1], 1)], note=" Corrected.")
        eventually(lambda: answers_once_at(mesh, moved[0], 4), "the new version applied", 120)
        eventually(lambda: refusals(mesh, run) == {(moved[0], "stale_version"),
                                                    (moved[1], "stale_version")},
                   "the old versions refused as stale", 60)
        assert answers_once_at(mesh, moved[1], 3)
        new_records = {k: v for k, v in placed(read_topic(mesh, "docs.normalized.v1")).items()
                       if k not in normalized}
        fourth = [p for (p, _), (key, value) in new_records.items()
                  if key == moved[0].encode() and value and json.loads(value)["version"] == 4]
        assert fourth == [partition_of(moved[0].encode(), NEW)] != \
            [partition_of(moved[0].encode(), OLD)]
        for d in moved + stayed:
            eventually(lambda d=d: answers_once_at(mesh, d, 4 if d == moved[0] else
                                                   1 if d in stayed else 3),
                       f"{d} still found once", 30)
        # (c) new documents land on the new partitions and are found
        for d in fresh:
            eventually(lambda d=d: answers_once_at(mesh, d, 1), f"new {d} found", 120)
        landed = {r.key.decode(): r.partition for r in read_topic(mesh, "docs.normalized.v1")
                  if r.key is not None and r.key.decode() in fresh}
        assert landed == {d: partition_of(d.encode(), NEW) for d in fresh}
        assert set(landed.values()) <= {4, 5}
        assert refusals(mesh, run + "n") == set() and refusals(mesh, run + "s") == set()
    finally:
        second.stop()


# A crash part-way through, and the re-run: no mesh, synthetic records on the topics.
def keyed(n: int) -> list[str]:
    return [f"resume-{i}" for i in range(n)]


async def seed(kafka: KafkaSettings) -> dict[str, list[Any]]:
    """Records as a 4-partition mesh leaves them, and a group that consumed them all."""
    await ensure_topics(kafka, wait_s=10)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5)
    await producer.start()
    try:
        for version in (1, 2):
            for d in keyed(12):
                key, old = d.encode(), partition_of(d.encode(), OLD)
                await producer.send_and_wait("docs.parsed.v1", b"doc %d" % version, key=key)
                await producer.send_and_wait("chunks.v1", b"chunks %d" % version, key=key)
                await producer.send_and_wait("chunks.embedded.v1", encode(EmbeddedChunkSet(
                    doc_id=d, version=version, source="s", domain="d", event_time=1.0,
                    ingest_time=2.0, model_id="m", dim=3)), key=key)
                await producer.send_and_wait(CHANGELOG, json.dumps({"version": version}).encode(),
                                             key=json.dumps(d).encode(), partition=old)
    finally:
        await producer.stop()
    return await consumed(kafka)


async def consumed(kafka: KafkaSettings) -> dict[str, list[Any]]:
    """A group commits every record of docs.parsed.v1 and chunks.v1; returns them."""
    before = {t: await read_all(kafka, t) for t in ("docs.parsed.v1", "chunks.v1")}
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id="grow-test",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        ends = {TopicPartition(r.topic, r.partition): r.offset + 1
                for t in before for r in before[t]}
        consumer.assign(list(ends))
        await consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in ends.items()})
    finally:
        await consumer.stop()
    return before


async def produce_late(kafka: KafkaSettings) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait("docs.parsed.v1", b"late", key=b"resume-0")
    finally:
        await producer.stop()


async def read_all(kafka: KafkaSettings, topic: str) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, group_id=None,
                                auto_offset_reset="earliest", fetch_max_wait_ms=10)
    await consumer.start()
    out: list[Any] = []
    try:
        while batch := await consumer.getmany(timeout_ms=1000):
            for records in batch.values():
                out += records
    finally:
        await consumer.stop()
    return sorted(out, key=lambda r: (r.partition, r.offset))


class Crash(Exception):
    pass


def crash_at(line: str) -> Any:
    def say(message: str) -> None:
        if message.startswith(line):
            raise Crash(message)
    return say


def test_a_crashed_grow_finishes_when_run_again(tmp_path: Path, own_broker: str) -> None:
    kafka = kafka_of(own_broker)
    before = asyncio.run(seed(kafka))
    state, run_dir = tmp_path / "grow", tmp_path / "run"

    def grow_run(say: Any, target: int = NEW) -> int:
        return asyncio.run(grow_mesh(kafka, target, state, run_dir, say=say))

    asyncio.run(produce_late(kafka))  # not consumed yet: refused, nothing changed
    said: list[str] = []
    assert grow_run(said.append) == 1
    assert "  group grow-test has 1 unconsumed record(s) on docs.parsed.v1: let it drain" in \
        said[-1].splitlines()
    assert not (state / "grow.json").exists()
    assert {t: n for t, n in counts_of(own_broker).items() if t in GROWN} == \
        dict.fromkeys(GROWN, OLD)
    before = asyncio.run(consumed(kafka))
    with pytest.raises(Crash):  # docs.raw.v1 and docs.parsed.v1 grown, the rest not yet
        grow_run(crash_at("docs.parsed.v1: 4 -> 6 partitions"))
    counts = counts_of(own_broker)
    assert (counts["docs.raw.v1"], counts["docs.parsed.v1"], counts["docs.normalized.v1"],
            counts[CHANGELOG]) == (NEW, NEW, OLD, OLD)
    with pytest.raises(InvalidInput) as info:  # another target while this one is under way
        grow_run(lambda message: None, 8)
    assert info.value.reason == "growth_under_way"
    assert "--grow 6" in str(info.value.detail)
    with pytest.raises(Crash):  # the changelog's records saved ...
        grow_run(crash_at(f"{CHANGELOG}: each key's newest record saved to"))
    assert len((state / f"{CHANGELOG}.records.jsonl").read_text().splitlines()) == 12
    asyncio.run(delete_topic(kafka, CHANGELOG))  # ... and it deleted, not yet re-created
    moving = sum(moves(d.encode()) for d in keyed(12))
    assert 0 < moving < 12
    with pytest.raises(Crash):  # half of the in-place re-homing done
        grow_run(crash_at(f"chunks.embedded.v1: {moving} key(s) re-homed"))
    assert (state / "grow.json").exists()
    said = []
    assert grow_run(said.append) == 0, said
    assert not (state / "grow.json").exists()
    assert not [m for m in said if "-> 6 partitions" in m or "re-created" in m], said
    assert "chunks.embedded.v1: 0 key(s) re-homed, 0 retired (delete)" in said, said
    assert f"chunks.v1: {moving} key(s) re-homed, {moving} retired (tombstone)" in said, said

    counts = counts_of(own_broker)
    assert {t: counts[t] for t in GROWN} == dict.fromkeys(GROWN, NEW)
    # Old records keep their partition and offset; the group's offsets are as they were.
    for topic, old in before.items():
        now = placed(asyncio.run(read_all(kafka, topic)))
        assert {k: now.get(k) for k in placed(old)} == placed(old), topic
    committed = asyncio.run(committed_offsets(kafka, "grow-test", "docs.parsed.v1"))
    assert committed == {p: max(r.offset for r in before["docs.parsed.v1"] if r.partition == p)
                         + 1 for p in {r.partition for r in before["docs.parsed.v1"]}}
    # The chunks.v1 reader starts after the re-home writes, on all six partitions.
    chunk_ends = end_offsets(own_broker, "chunks.v1", NEW)
    assert asyncio.run(committed_offsets(kafka, "grow-test", "chunks.v1")) == \
        {p: o for (_, p), o in chunk_ends.items()}
    assert sum(chunk_ends.values()) == len(before["chunks.v1"]) + 2 * moving
    # Each key's newest record: on its new partition only (the changelog: exactly once).
    hows: tuple[tuple[str, Retire], ...] = (("chunks.embedded.v1", "delete"),
                                            ("chunks.v1", "tombstone"))
    for topic, how in hows:
        records = asyncio.run(read_all(kafka, topic))
        newest: dict[tuple[bytes, int], Any] = {}
        for r in records:
            newest[r.key, r.partition] = r
        live = {(k, p) for (k, p), r in newest.items()
                if not retired(Rec(p, r.offset, k, r.value), how)}
        assert live == {(d.encode(), partition_of(d.encode(), NEW)) for d in keyed(12)}, topic
    changelog = asyncio.run(read_all(kafka, CHANGELOG))
    assert sorted((r.key, r.partition, r.value) for r in changelog) == sorted(
        (json.dumps(d).encode(), partition_of(d.encode(), NEW), b'{"version": 2}')
        for d in keyed(12))


async def delete_topic(kafka: KafkaSettings, topic: str) -> None:
    """Delete `topic` and wait until the broker no longer lists it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        for _ in range(100):
            if topic not in await admin.list_topics():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{topic} still listed after its delete")
    finally:
        await admin.close()


async def committed_offsets(kafka: KafkaSettings, group: str, topic: str) -> dict[int, int]:
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                              enable_auto_commit=False)
    await reader.start()
    try:
        got = {p: await reader.committed(TopicPartition(topic, p)) for p in range(NEW)}
    finally:
        await reader.stop()
    return {p: o for p, o in got.items() if o is not None}
