"""Retrieval workers as real processes on a real broker: kill -9 recovery and rebalancing.

Each test gets its own embedded broker: the retrieval group and topic names are fixed by the
contract, so a worker here must not join the session mesh's retrieval group.
Chunk sets are produced the way the embedding service produces them (plain aiokafka), and
shards are asked the way inference asks them (one SearchRequest per partition); every
answer is checked against a brute-force oracle over the chunks that should be live.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from aiokafka import AIOKafkaProducer

from scripts.benchlib.shard_client import Asker
from services.cli.mesh import free_port, spawn_broker
from services.cli.procs import Child, service_argv, spawn, stop
from shared.contract.codec import encode
from shared.contract.records import (
    EmbeddedChunk,
    EmbeddedChunkSet,
    QueryHits,
    SearchHit,
    SearchReply,
    encode_vector,
)
from shared.contract.topics import CHUNKS_EMBEDDED
from shared.kafka.admin import ensure_topics
from shared.settings import KafkaSettings
from tests.support.polling import eventually

pytestmark = pytest.mark.integration
DIM, MODEL = 8, "test-model"
Live = dict[str, tuple[np.ndarray, str]]  # chunk id -> (vector, domain)


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype("float32")
    return v / np.linalg.norm(v)


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    child = spawn_broker("127.0.0.1", port, tmp_path / "broker")
    try:
        kafka = KafkaSettings(bootstrap=f"127.0.0.1:{port}")
        asyncio.run(ensure_topics(kafka, wait_s=30))
        yield kafka.bootstrap
    finally:
        stop([child], 10)


class Workers:
    """Retrieval worker processes started by a test; every one is stopped at the end."""

    def __init__(self, bootstrap: str, run_dir: Path) -> None:
        self.bootstrap, self.run_dir, self.children = bootstrap, run_dir, []  # type: ignore[var-annotated]

    def start(self, name: str, data_dir: Path) -> Child:
        env = {"STREAMRAG_KAFKA_BOOTSTRAP": self.bootstrap,
               "STREAMRAG_DATA_DIR": str(data_dir),
               # IVF past 100 chunks per shard, every list probed: exact, so comparable.
               "STREAMRAG_RETRIEVAL_IVF_THRESHOLD": "100",
               "STREAMRAG_RETRIEVAL_NPROBE": "100000",
               "STREAMRAG_RETRIEVAL_SNAPSHOT_INTERVAL_S": "1"}
        child = spawn(name, service_argv("retrieval"), self.run_dir, env)
        self.children.append(child)
        return child

    def kill9(self, child: Child) -> None:
        os.killpg(child.popen.pid, signal.SIGKILL)
        child.popen.wait()

    def stop_all(self) -> None:
        stop(self.children, 10)


@pytest.fixture
def workers(bootstrap: str, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(bootstrap, tmp_path / "run")
    try:
        yield w
    finally:
        w.stop_all()


def chunk_set(doc: int, version: int, seeds: list[int], op: str = "upsert") -> EmbeddedChunkSet:
    chunks = tuple(EmbeddedChunk(chunk_id=f"doc{doc}#v{version}#{i}", ordinal=i,
                                 text=f"doc {doc} v{version} chunk {i}", token_count=5,
                                 vector=encode_vector(unit(s))) for i, s in enumerate(seeds))
    return EmbeddedChunkSet(doc_id=f"doc{doc}", version=version, op=op,  # type: ignore[arg-type]
                            source="it", domain="pay" if doc % 3 == 0 else "ops",
                            event_time=1000.0 + doc, ingest_time=0, model_id=MODEL, dim=DIM,
                            chunks=chunks if op == "upsert" else ())


def produce(bootstrap: str, sets: list[EmbeddedChunkSet], live: Live) -> None:
    """Send the chunk sets keyed by doc id, and apply them to the oracle's `live` chunks."""
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for s in sets:
                await producer.send_and_wait(CHUNKS_EMBEDDED.name, encode(s),
                                             key=s.doc_id.encode())
        finally:
            await producer.stop()
    asyncio.run(go())
    for s in sets:
        for cid in [c for c in live if c.startswith(f"{s.doc_id}#")]:
            del live[cid]
        for c in s.chunks:
            live[c.chunk_id] = (c.array(), s.domain)


def generation(bootstrap: str, live: Live, start: int, docs: int, seed: int) -> None:
    """`docs` new documents of 1-3 chunks, then updates and deletes of some earlier ones."""
    rng = np.random.default_rng(seed)
    sets = [chunk_set(d, 1, [d * 10 + i for i in range(int(rng.integers(1, 4)))])
            for d in range(start, start + docs)]
    sets += [chunk_set(d, seed + 2, [d * 10 + 7]) for d in range(start, start + docs, 9)]
    sets += [chunk_set(d, seed + 3, [], op="delete") for d in range(start + 4, start + docs, 13)]
    produce(bootstrap, sets, live)


SHARDS = CHUNKS_EMBEDDED.partitions  # one per partition: the configured count
QUERIES = [(unit(10_000 + i), domain) for i, domain in enumerate([None, "pay", "ops"] * 3)]
Answers = list[list[tuple[str, float]]]


def hits_of(reply: SearchReply) -> tuple[SearchHit, ...]:
    """The one query's hits in a reply to Asker.scatter."""
    [result] = reply.results or [QueryHits(query_id="q")]
    assert not result.error, result.error
    return result.hits


def answers(bootstrap: str, live: Live, timeout_s: float = 120) -> Answers:
    """Every query's merged top 15, once all 4 shards answer and hold exactly `live`."""
    async def go() -> Answers:
        async with Asker(bootstrap, MODEL, DIM) as ask:
            deadline = time.monotonic() + timeout_s
            last: object = None
            while time.monotonic() < deadline:
                replies = await ask.scatter(QUERIES[0][0], 1000, None)
                last = [(r.partition, r.error, r.shard_size) for r in replies]
                everything = [h.chunk_id for r in replies for h in hits_of(r)]
                if (len(replies) == SHARDS and not any(r.error for r in replies)
                        and sorted(everything) == sorted(live)):  # each live chunk once
                    return [await merged(ask, q, domain) for q, domain in QUERIES]
                await asyncio.sleep(0.5)
        raise AssertionError(f"shards never held exactly the live chunks; last {last}")
    return asyncio.run(go())


async def merged(ask: Asker, q: np.ndarray, domain: str | None) -> list[tuple[str, float]]:
    replies = await ask.scatter(q, 15, domain)
    assert len(replies) == SHARDS and not any(r.error for r in replies)
    hits = sorted((h for r in replies for h in hits_of(r)), key=lambda h: -h.score)
    assert all(domain is None or h.domain == domain for h in hits)
    return [(h.chunk_id, round(h.score, 4)) for h in hits[:15]]


def oracle(live: Live) -> list[list[tuple[str, float]]]:
    out = []
    for q, domain in QUERIES:
        scored = [(cid, round(float(v @ q), 4)) for cid, (v, d) in live.items()
                  if domain is None or d == domain]
        out.append(sorted(scored, key=lambda x: -x[1])[:15])
    return out


SCORE_TOL = 2e-4  # FAISS scores in float32 against the oracle's float64, both rounded


def same(got: list[list[tuple[str, float]]], want: list[list[tuple[str, float]]]) -> None:
    """Same scores, and the same chunks wherever the top 15 is not decided by a tie: chunks
    scoring (within tolerance) what the 15th does may be any of those tied, the rest not."""
    for g, w in zip(got, want, strict=True):
        assert [s for _, s in g] == pytest.approx([s for _, s in w], abs=SCORE_TOL)
        cut = w[-1][1] if len(w) == 15 else -math.inf

        def decided(hits: list[tuple[str, float]], cut: float = cut) -> set[str]:
            return {c for c, s in hits if s > cut + SCORE_TOL}
        assert decided(g) == decided(w)


def test_kill9_restart_from_snapshot_and_from_scratch_agree(
        bootstrap: str, workers: Workers, tmp_path: Path) -> None:
    live: Live = {}
    data = tmp_path / "data"
    first = workers.start("retrieval-a", data)
    generation(bootstrap, live, 0, 600, seed=0)
    before = answers(bootstrap, live)
    same(before, oracle(live))
    snapshots = data / "retrieval-shards"
    eventually(lambda: len(list(snapshots.glob("*/shard-*.npz"))) >= SHARDS,
               "a snapshot of every shard", 30, 0.5)
    time.sleep(2)  # let a periodic snapshot catch the last records (replay covers it anyway)
    workers.kill9(first)

    generation(bootstrap, live, 600, 150, seed=1)  # written while no worker runs
    second = workers.start("retrieval-b", data)
    from_snapshot = answers(bootstrap, live)
    same(from_snapshot, oracle(live))
    log = second.log_path.read_text()
    assert len(re.findall(r"shard \d of \S+ loaded \d+ chunks", log)) == SHARDS
    assert "rebuilding from offset 0" not in log
    workers.kill9(second)

    shutil.rmtree(snapshots)
    third = workers.start("retrieval-c", data)
    from_scratch = answers(bootstrap, live)
    assert from_scratch == from_snapshot
    assert third.log_path.read_text().count("rebuilding from offset 0") == SHARDS


def owned(child: Child) -> set[int]:
    """The partitions a worker's last completed rebalance gave it (from its log)."""
    lines = [ln for ln in child.log_path.read_text().splitlines() if "resume at" in ln]
    if not lines:
        return set()
    listed = lines[-1].split("shards [", 1)[1].split("]", 1)[0]
    return {int(p) for p in listed.split(",") if p.strip()}


def test_rebalance_moves_partitions_and_every_chunk_stays_searchable_once(
        bootstrap: str, workers: Workers, tmp_path: Path) -> None:
    live: Live = {}
    a = workers.start("retrieval-a", tmp_path / "data-a")
    generation(bootstrap, live, 0, 300, seed=0)
    same(answers(bootstrap, live), oracle(live))

    b = workers.start("retrieval-b", tmp_path / "data-b")  # its own disk: rebuilds what moves
    deadline = time.monotonic() + 90
    while not (owned(b) and owned(a) | owned(b) == set(range(SHARDS))
               and not owned(a) & owned(b)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert owned(a) and owned(b) and owned(a) | owned(b) == set(range(SHARDS))
    assert not owned(a) & owned(b)
    generation(bootstrap, live, 300, 100, seed=1)  # both workers index their own shards
    same(answers(bootstrap, live), oracle(live))

    workers.kill9(a)  # everything moves to b once the group notices
    generation(bootstrap, live, 400, 60, seed=2)
    same(answers(bootstrap, live, timeout_s=180), oracle(live))
    assert owned(b) == set(range(SHARDS))
