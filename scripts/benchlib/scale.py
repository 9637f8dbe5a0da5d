"""Scale-out on a broker of its own: each heavy stage as a group of worker processes.

The heavy stages (redaction, embedding, retrieval) run as N separate processes of their
service, all members of the stage's one consumer group; chunking (and, given a chain,
the ledger) run once. Documents go straight to docs.normalized.v1, as ingest would send
them. tests/integration/test_scale_out.py and scripts/bench_scale drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import CoordinatorLoadInProgressError, GroupCoordinatorNotAvailableError

from scripts.benchlib.procs import cpu_s
from scripts.benchlib.shard_client import Asker
from services.cli.mesh import free_port, spawn_broker
from services.cli.procs import Child, service_argv, spawn, stop
from shared.contract.records import Document, SearchReply
from shared.contract.topics import (
    CHUNKS,
    CHUNKS_EMBEDDED,
    DOCS_NORMALIZED,
    SEARCH_REQUESTS,
    SERVICES,
    TopicSpec,
)
from shared.encoder.model import MODEL_ID
from shared.kafka.admin import ensure_topics
from shared.kafka.reader import read_topic
from shared.settings import KafkaSettings

HEAVY = ("redaction", "embedding", "retrieval")
# What each heavy stage's group consumes: its partitions are what the workers share.
SOURCE: dict[str, TopicSpec] = {"redaction": DOCS_NORMALIZED, "embedding": CHUNKS,
                                "retrieval": CHUNKS_EMBEDDED}
DIM = 384  # all-MiniLM-L6-v2, the model every worker loads
ROOT = Path(__file__).resolve().parents[2]


FILLER = ("The export job retried three times before the queue drained, and the on-call "
          "engineer paused the nightly batch so that the ledger could catch up. ",
          "Customers saw stale balances for about twenty minutes; support answered the "
          "tickets with the standard outage note and a link to the status page. ",
          "The follow-up adds an alert on queue depth, a runbook entry for pausing the "
          "batch, and a test that replays a day of exports against a staging ledger. ")


def document(i: int, tag: str, sentences: int = 0) -> Document:
    """A document with PII in it (a name, a phone number), one version; `sentences` more
    sentences of ordinary text after it (0: a short one-chunk document; 6: about 1 KB)."""
    text = (f"Ticket {i} of {tag}: call Maria Lopez on 415-555-01{i % 100:02d} about invoice "
            f"{1000 + i}; the billing export stalled on node {i}. "
            + "".join(FILLER[(i + k) % len(FILLER)] for k in range(sentences)))
    return Document(doc_id=f"{tag}-{i:04d}", version=1, source="scale", domain="ops",
                    event_time=1000.0 + i, ingest_time=0, text=text.strip())


class ScaleMesh:
    """A broker of its own, chunking (and the ledger) once, and pools of heavy workers."""

    def __init__(self, run_dir: Path, env: dict[str, str] | None = None,
                 rpc_url: str | None = None) -> None:
        self.run_dir, self.rpc_url = run_dir, rpc_url
        self.bootstrap = f"127.0.0.1:{free_port()}"
        self.kafka = KafkaSettings(bootstrap=self.bootstrap)
        self.env = {"STREAMRAG_KAFKA_BOOTSTRAP": self.bootstrap,
                    # every embedding worker reads the one exported ONNX graph
                    "STREAMRAG_EMBEDDING_MODEL_CACHE_DIR": str(ROOT / ".run" / "models"),
                    **({"STREAMRAG_LEDGER_RPC_URL": rpc_url} if rpc_url else {}),
                    **(env or {})}
        self.infra: list[Child] = []
        self.workers: dict[str, list[Child]] = {stage: [] for stage in HEAVY}
        self.started = 0  # workers added so far: each gets a fresh name and data dir
        self.leaving: list[Child] = []  # sent SIGTERM: out of their pools, maybe not gone

    def start(self, once: Iterable[str] = ("chunking",)) -> None:
        port = int(self.bootstrap.rsplit(":", 1)[1])
        self.infra.append(spawn_broker("127.0.0.1", port, self.run_dir))
        asyncio.run(ensure_topics(self.kafka))
        for name in [*once, *(["ledger"] if self.rpc_url else [])]:
            self.infra.append(self._spawn(name, name))

    def _spawn(self, service: str, name: str) -> Child:
        # A data dir each, one data-key store for all (what one stage seals the next opens).
        env = {**self.env, "STREAMRAG_DATA_DIR": str(self.run_dir / "data" / name),
               "STREAMRAG_KEYS_PATH": str(self.run_dir / "keys" / "versions.sqlite")}
        return spawn(name, service_argv(service), self.run_dir, env)

    def add(self, stage: str, n: int = 1) -> list[Child]:
        """n more workers of `stage`, each a process of its own with its own data dir."""
        out = []
        for _ in range(n):
            self.started += 1
            out.append(self._spawn(stage, f"{stage}-{self.started}"))
        self.workers[stage] += out
        return out

    def kill9(self, child: Child) -> int:
        """SIGKILL one worker (no goodbye to its group); its exit code."""
        self.drop(child)
        os.killpg(child.popen.pid, signal.SIGKILL)
        return child.popen.wait(30)

    def terminate(self, child: Child) -> None:
        """SIGTERM one worker (a graceful stop: it leaves its group on the way out). It is
        out of its pool at once; waiting for it to exit is the caller's."""
        self.drop(child)
        self.leaving.append(child)
        os.killpg(child.popen.pid, signal.SIGTERM)

    def pause(self, child: Child) -> None:
        """SIGSTOP one worker: alive but silent, no heartbeat, its batch in hand frozen."""
        os.killpg(child.popen.pid, signal.SIGSTOP)

    def resume(self, child: Child) -> None:
        os.killpg(child.popen.pid, signal.SIGCONT)

    def restart(self, child: Child) -> Child:
        """Start a worker that is gone again, under its name and with its data dir (its
        shard snapshots, say), as a supervisor would; its log goes on in the same file."""
        stage = child.name.rsplit("-", 1)[0]
        again = self._spawn(stage, child.name)
        self.workers[stage].append(again)
        return again

    def drop(self, child: Child) -> None:
        """Take a worker out of its pool (one that is gone or going)."""
        for pool in self.workers.values():
            if child in pool:
                pool.remove(child)

    def stop(self) -> None:
        workers = [c for pool in self.workers.values() for c in pool]
        for child in workers:  # a stopped process would not act on the SIGTERM
            if child.alive():
                with contextlib.suppress(ProcessLookupError):
                    self.resume(child)
        stop([*self.leaving, *workers], 15)
        stop(self.infra, 15)

    def crashed(self) -> list[str]:
        """Workers that exited on their own (each with its log): none should."""
        return [f"{c.name} exited {c.popen.returncode}, log {c.log_path}"
                for c in [*self.infra, *(c for p in self.workers.values() for c in p)]
                if not c.alive()]

    def cpu(self, stage: str) -> dict[int, float]:
        """CPU seconds (utime + stime) so far of each live worker of `stage`, by pid."""
        return {c.popen.pid: cpu_s(c.popen.pid) for c in self.workers[stage]}

    def produce(self, docs: list[Document]) -> None:
        self.produce_raw([(d.doc_id.encode(), d.model_dump_json().encode()) for d in docs])

    def produce_raw(self, records: list[tuple[bytes, bytes]]) -> None:
        """(key, value) records onto docs.normalized.v1, as they are (bad ones too)."""
        async def go() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
            await producer.start()
            try:
                for key, value in records:
                    await producer.send(DOCS_NORMALIZED.name, value, key=key)
                await producer.flush()
            finally:
                await producer.stop()
        asyncio.run(go())

    def read(self, spec: TopicSpec) -> list[Any]:
        """Every record of `spec` up to its end."""
        return asyncio.run(read_topic(self.kafka, spec))

    def assignment(self, stage: str) -> list[dict[str, set[int]]]:
        """What each member of the stage's group is assigned, {topic: partitions}, as the
        broker describes the group (DescribeGroups); [] while it is not Stable
        (rebalancing)."""
        return asyncio.run(_assignments(self.bootstrap, SERVICES[stage]))

    def balanced(self, stage: str) -> bool:
        """The group is Stable (one generation) holding exactly the live workers, and every
        partition of the stage's source topic is owned by exactly one of them (retrieval:
        and each worker's search requests are the partitions of its shards, the
        co-partitioning scatter relies on)."""
        members = self.assignment(stage)
        if len(members) != len(self.workers[stage]):
            return False
        src = SOURCE[stage].name
        owned = [p for m in members for p in m.get(src, set())]
        if sorted(owned) != list(range(SOURCE[stage].partitions)):
            return False
        return stage != "retrieval" or all(
            m.get(SEARCH_REQUESTS.name, set()) == m.get(src, set()) for m in members)

    def search_all(self, top_k: int = 1000) -> list[SearchReply]:
        """Every shard's answer to one query asking for everything it holds (one
        SearchRequest per partition, as inference scatters)."""
        async def go() -> list[SearchReply]:
            q = np.full(DIM, 1 / np.sqrt(DIM), dtype="float32")
            async with Asker(self.bootstrap, MODEL_ID, DIM) as ask:
                return await ask.scatter(q, top_k, None)
        return asyncio.run(go())


async def _assignments(bootstrap: str, group: str) -> list[dict[str, set[int]]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [desc] = await admin.describe_consumer_groups([group])
    except (GroupCoordinatorNotAvailableError, CoordinatorLoadInProgressError):
        return []  # the group's coordinator is still being elected or loaded: not Stable
    finally:
        await admin.close()
    [found] = desc.groups
    return members_assigned(found[5]) if found[2] == "Stable" else []


def members_assigned(members: Iterable[Any]) -> list[dict[str, set[int]]]:
    """Each member's assignment, {topic: partitions}, from a DescribeGroups answer's members
    (member id, client id, host, metadata, assignment: the consumer protocol's bytes, as
    the group's leader made them)."""
    out = []
    for member in members:
        raw = member[4]
        topics = ConsumerProtocolMemberAssignment.decode(raw).assignment if raw else []
        out.append({topic: set(parts) for topic, parts in topics})
    return out


def wait(check: Any, what: str, timeout_s: float, mesh: ScaleMesh | None = None) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` (and any worker
    that died on its own meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if mesh is not None and mesh.crashed():
            raise AssertionError(f"waiting for {what}: {mesh.crashed()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout_s:.0f}s")
        time.sleep(0.5)
