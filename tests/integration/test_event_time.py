"""Random interleavings of many documents' versions (shuffled, duplicated, older ones held
back) through the real mesh, watched through the gRPC API while they flow: the index ends
with exactly the newest version of each document and never serves an older one once the
newest was served. Then the same run seen by `streamrag status --json` (watermark, lag)
and the Stats RPC (windowed counts)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time

import grpc
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from services.cli.mesh import Endpoints as RunningMesh
from shared.contract.topics import DOCS_RAW
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc
from tests.support.mesh import uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
DOCS = 12
VERSIONS = 4
STEP_S = 120.0  # event times: version v of every document at T0 + STEP_S v, so with the
T0 = 1_790_000_000.0  # default allowed lateness (300 s) a version 3 behind the newest is late
LATENESS_S = 300.0


def change(run: str, doc: int, version: int) -> bytes:
    return json.dumps({
        "id": f"{run}-{doc}", "source": run, "domain": "ops", "version": version,
        "event_time": T0 + STEP_S * version, "title": f"Runbook {doc}",
        "text": f"Interleaved runbook {doc} at revision {version} of {VERSIONS}."}).encode()


def arrival(rng: random.Random) -> list[tuple[int, int]]:
    """Every (doc, version) once, a third again, shuffled; then some older versions held
    back and sent after everything else (a slow replica catching up)."""
    pairs = [(d, v) for d in range(DOCS) for v in range(1, VERSIONS + 1)]
    pairs += rng.sample(pairs, len(pairs) // 3)
    rng.shuffle(pairs)
    late = [p for p in pairs if p[1] < VERSIONS and rng.random() < 0.25]
    return [p for p in pairs if p not in late] + late


def produce_keyed(mesh: RunningMesh, values: list[tuple[bytes, bytes]]) -> None:
    """One producer, records sent one after another (in order per partition)."""
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap)
        await producer.start()
        try:
            for key, value in values:
                await producer.send_and_wait("docs.raw.v1", value, key=key)
        finally:
            await producer.stop()
    asyncio.run(go())


def expected(run: str, order: list[tuple[int, int]]) -> dict[str, int]:
    """What ingest must count for this arrival: per document, a version applies when newer
    than the applied one, repeats silently one applied before, is stale when older; per
    partition (the producer's, which ingest's re-keying keeps), a change is late when its
    event time is more than the allowed lateness behind the newest seen there."""
    part = DefaultPartitioner()
    applied: dict[int, int] = {}
    history: dict[int, set[int]] = {}  # every version applied (a replay of one is silent)
    newest: dict[int, float] = {}
    out = dict.fromkeys(("new", "updated", "stale", "late", "late_applied"), 0)
    for d, v in order:
        p = part(f"{run}-{d}".encode(), list(range(DOCS_RAW.partitions)),
                 list(range(DOCS_RAW.partitions)))
        t = T0 + STEP_S * v
        late = t < newest.get(p, t) - LATENESS_S
        newest[p] = max(newest.get(p, t), t)
        fresh = v > applied.get(d, 0)
        out["late"] += late
        out["late_applied"] += late and fresh
        if fresh:
            out["new" if d not in applied else "updated"] += 1
            applied[d] = v
            history.setdefault(d, set()).add(v)
        elif v < applied[d] and v not in history[d]:
            out["stale"] += 1
    return out


class Watcher:
    """Polls Retrieve for the run while it flows; records each document's version seen."""

    def __init__(self, mesh: RunningMesh, run: str) -> None:
        self.mesh, self.run = mesh, run
        self.seen: dict[str, list[frozenset[int]]] = {}
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._go)

    def snapshot(self, stub: pb_grpc.InferenceStub) -> dict[str, frozenset[int]] | None:
        """{doc id: the revisions its served chunks hold}, or None when a shard did not
        answer."""
        request = pb.RetrieveRequest(question="interleaved runbook revision", top_k=50,
                                     source=self.run)
        try:
            resp = stub.Retrieve(request, timeout=10)
        except grpc.RpcError:
            return None
        if resp.partial:
            return None
        out: dict[str, frozenset[int]] = {}
        for chunk in resp.chunks:
            revision = int(chunk.text.split(" at revision ")[1].split()[0])
            out[chunk.doc_id] = out.get(chunk.doc_id, frozenset()) | {revision}
        return out

    def _go(self) -> None:
        with grpc.insecure_channel(self.mesh.grpc_target) as channel:
            stub = pb_grpc.InferenceStub(channel)
            while not self._stop.is_set():
                self.record(self.snapshot(stub))
                time.sleep(0.2)

    def record(self, snap: dict[str, frozenset[int]] | None) -> None:
        if snap is None:
            return
        self.polls += 1
        for doc, revision in snap.items():
            self.seen.setdefault(doc, []).append(revision)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_interleaved_versions_end_at_the_newest_and_never_go_back(mesh: RunningMesh) -> None:
    run = uid("interleave")
    order = arrival(random.Random(1414))
    docs = {f"{run}-{d}" for d in range(DOCS)}
    with Watcher(mesh, run) as watcher:
        for i in range(0, len(order), 16):  # in waves, so the watcher sees states between
            produce_keyed(mesh, [(f"{run}-{d}".encode(), change(run, d, v))
                                 for d, v in order[i:i + 16]])

        def final() -> dict[str, frozenset[int]] | None:
            with grpc.insecure_channel(mesh.grpc_target) as channel:
                snap = watcher.snapshot(pb_grpc.InferenceStub(channel))
            ok = snap is not None and set(snap) == docs and \
                set(snap.values()) == {frozenset({VERSIONS})}
            return snap if ok else None
        eventually(final, "every document served at its newest revision only")
    assert watcher.polls > 0
    newest_only = frozenset({VERSIONS})
    for doc, polls in watcher.seen.items():
        assert doc in docs
        first = next((i for i, revs in enumerate(polls) if VERSIONS in revs), len(polls))
        assert all(revs == newest_only for revs in polls[first:]), (
            f"{doc} served an older revision once the newest was served: {polls}")

    want = expected(run, order)
    assert want["late"] and want["stale"]  # the arrival exercises both
    stats = eventually(lambda: run_stats(mesh, run, len(order)),
                       "the run's counts in the hour window")
    assert stats == {k: n for k, n in {
        "received": len(order), "new": want["new"], "updated": want["updated"],
        "dead_lettered.stale_version": want["stale"]}.items() if n}

    before = time.time()
    status = eventually(lambda: run_status(mesh, run, len(order)),
                        "the run's source in status --json")
    after = time.time()
    newest = T0 + STEP_S * VERSIONS
    assert status["watermark"] == newest - LATENESS_S
    assert (status["seen"], status["late"], status["late_applied"]) == (
        len(order), want["late"], want["late_applied"])
    assert before - newest <= status["lag_s"] <= after - newest + 1
    assert sum(status["lateness"].values()) == len(order)


def run_stats(mesh: RunningMesh, run: str, total: int) -> dict[str, int] | None:
    with grpc.insecure_channel(mesh.grpc_target) as channel:
        resp = pb_grpc.InferenceStub(channel).Stats(
            pb.StatsRequest(window=pb.STATS_WINDOW_HOUR, source=run), timeout=10)
    counts = {c.kind: c.count for c in resp.counts if c.domain == "ops"}
    return counts if counts.get("received", 0) >= total else None


def run_status(mesh: RunningMesh, run: str, total: int) -> dict | None:
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
           "STREAMRAG_MESH_RUN_DIR": str(mesh.run_dir),
           "STREAMRAG_MESH_INFERENCE_TARGET": mesh.grpc_target}
    out = subprocess.run([sys.executable, "-m", "services.cli.main", "status", "--json"],
                         capture_output=True, text=True, env=env, timeout=60)
    report = json.loads(out.stdout)
    mine = [s for s in report["event_time"] if s["source"] == run]
    return mine[0] if mine and mine[0]["seen"] >= total else None
