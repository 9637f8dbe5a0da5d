"""kill -9 of each worker in turn while documents stream in: the supervisor brings each back
and every document becomes queryable exactly once.

It runs on both session meshes (one process per service, and the one-process default, whose
single worker is killed), which `isolated()` supervises with the same Supervisor as
`streamrag up`; workers are found and killed the way an operator would, by the pid files.
The mesh is whole again when the test ends (it waits for that), so later tests are unaffected.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections import Counter

import grpc
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from services.cli.mesh import ONEBOX
from services.cli.mesh import Endpoints as RunningMesh
from shared.contract.topics import all_topic_specs
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from tests.support.mesh import uid
from tests.support.polling import eventually
from tests.support.workers import alive, pid_of

pytestmark = pytest.mark.integration
# Upstream first, so records are in flight behind every restarted stage; inference last.
KILL_ORDER = ("ingest", "redaction", "chunking", "embedding", "retrieval", "ledger",
              "inference")
BUCKET = 40  # documents per query: under max_top_k (50), so one query sees a whole bucket
PACE_S = 0.25  # between two produced documents
SETTLE_S = 2.0  # after a replacement is up, before the next kill: the stream flows meanwhile
LIMIT_S = 240.0  # for every document to become searchable after the last kill
STABLE_S = 90.0  # the searchable set unchanged this long (all shards answering): it is final
PIPELINE = ("docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1",
            "chunks.v1", "chunks.embedded.v1")


class Stream:
    """Produces one small document every PACE_S with a plain producer until stopped."""

    def __init__(self, mesh: RunningMesh, run: str) -> None:
        self.mesh, self.run, self.sent = mesh, run, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._go()))
        self.error: BaseException | None = None

    def doc(self, i: int) -> bytes:
        return json.dumps({
            "id": f"{self.run}-{i}", "source": self.run, "domain": f"b{i // BUCKET}",
            "title": f"note {i}", "text": f"Supervision stream note {i} of {self.run}: the "
            f"worker restarted and record {i} still arrived."}).encode()

    async def _go(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.mesh.bootstrap)
        await producer.start()
        try:
            while not self._stop.is_set():
                doc_id = f"{self.run}-{self.sent}".encode()
                await producer.send_and_wait("docs.raw.v1", self.doc(self.sent), key=doc_id)
                self.sent += 1
                await asyncio.sleep(PACE_S)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            await producer.stop()

    def __enter__(self) -> Stream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def searchable(mesh: RunningMesh, run: str, buckets: int) -> list[str] | None:
    """Every doc id the mesh returns for this run (with repeats), or None while it cannot
    answer completely (a shard or inference still restarting)."""
    found: list[str] = []
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        for b in range(buckets):
            request = inference_pb2.QueryRequest(question="which worker restarted?", top_k=50,
                                                 source=run, domain=f"b{b}",
                                                 max_new_tokens=1)
            try:
                answer = stub.Query(request, timeout=15)
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    return None
                raise
            if answer.partial:
                return None
            found += [c.doc_id for c in answer.citations]
    return found


def wait_searchable(mesh: RunningMesh, run: str, count: int) -> list[str]:
    """What the mesh returns for the run's documents once it holds all of them, or once
    what it holds (answered completely) stopped changing for STABLE_S: a lost document
    never comes, and waiting the whole LIMIT_S for it would only slow the suite."""
    expected = {f"{run}-{i}" for i in range(count)}
    buckets = -(-count // BUCKET)
    deadline = time.monotonic() + LIMIT_S
    found: list[str] | None = None
    stable_since, last = time.monotonic(), None
    while time.monotonic() < deadline:
        now = searchable(mesh, run, buckets)
        if now is not None:
            found = now
            if set(now) >= expected:
                return now
            if set(now) != last:
                stable_since, last = time.monotonic(), set(now)
            elif time.monotonic() - stable_since > STABLE_S:
                return now
        time.sleep(0.5)
    assert found is not None, f"the mesh never answered completely within {LIMIT_S}s"
    return found


def keys_on(mesh: RunningMesh, topic: str) -> set[str]:
    """Every record key of `topic`, read with a plain consumer up to the end offsets it had
    when the read began: all of it, however long that takes on a loaded machine (a read
    bounded by time could stop short of the newest records, which are this test's)."""
    async def go() -> set[str]:
        consumer = AIOKafkaConsumer(bootstrap_servers=mesh.bootstrap, group_id=None,
                                    enable_auto_commit=False, fetch_max_wait_ms=10)
        await consumer.start()
        try:
            count = next(s.partitions for s in all_topic_specs() if s.name == topic)
            tps = [TopicPartition(topic, p) for p in range(count)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            keys: set[str] = set()
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    keys |= {(r.key or b"").decode(errors="replace") for r in records}
            return keys
        finally:
            await consumer.stop()
    return asyncio.run(go())


def where_lost(mesh: RunningMesh, missing: list[str]) -> dict[str, list[str]]:
    """For each missing document, the last pipeline topic it reached (read back with a
    plain consumer), so a loss names the stage that dropped it."""
    reached: dict[str, str] = {}
    for topic in PIPELINE:
        keys = keys_on(mesh, topic)
        for doc in missing:
            if doc in keys:
                reached[doc] = topic
    out: dict[str, list[str]] = {}
    for doc in missing:
        out.setdefault(f"last seen on {reached.get(doc, 'nothing')}", []).append(doc)
    return out


def workers(mesh: RunningMesh) -> tuple[str, ...]:
    """What to kill: every service's process, or the one worker that holds them all."""
    return (ONEBOX,) if (mesh.run_dir / "pids" / f"{ONEBOX}.pid").exists() else KILL_ORDER


def test_each_worker_killed_mid_stream_comes_back_and_every_document_is_queryable_once(
        each_mode: RunningMesh) -> None:
    mesh = each_mode
    run = uid("sup")
    replaced: dict[str, tuple[int, int]] = {}
    with Stream(mesh, run) as stream:
        time.sleep(SETTLE_S)  # the stream flows through every stage before the first kill
        for name in workers(mesh):
            old = pid_of(mesh, name)
            assert alive(old), f"{name} was not running before its kill"
            os.kill(old, signal.SIGKILL)
            new = eventually(lambda name=name, old=old: (pid := pid_of(mesh, name)) not in
                             (old, 0) and alive(pid) and pid, f"{name} restarted", 60)
            replaced[name] = (old, new)
            time.sleep(SETTLE_S)
    assert stream.error is None
    found = wait_searchable(mesh, run, stream.sent)
    for name, (old, new) in replaced.items():
        # Back, and still the first replacement: it did not die again after the restart.
        assert pid_of(mesh, name) == new and alive(new), name
        assert not alive(old)
        log = (mesh.run_dir / "logs" / f"{name}.log").read_text(errors="replace")
        assert f"--- streamrag: {name} killed by SIGKILL; restarting ---" in log
    repeats = {doc: n for doc, n in Counter(found).items() if n > 1}
    assert not repeats, f"documents returned more than once: {repeats}"
    expected = {f"{run}-{i}" for i in range(stream.sent)}
    assert set(found) <= expected
    missing = sorted(expected - set(found), key=lambda d: int(d.rsplit("-", 1)[1]))
    lost = where_lost(mesh, missing) if missing else {}
    assert not missing, f"{len(missing)} of {stream.sent} never became searchable: {lost}"
