"""Scale-out on the real embedded broker: 1, then 2, then 4 worker processes of each heavy
stage (redaction, embedding, retrieval) in the stage's one consumer group, one worker of
each killed with SIGKILL while the last wave streams in.

A lean mesh of its own (scripts/benchlib/scale.py: broker, anvil, ledger, chunking once;
documents straight to docs.normalized.v1), since the heavy stages' group names are fixed by
the contract and must not meet the session mesh's. Everything is judged from outside: the
topics read with a plain consumer, each group's members and their partitions from the
broker (DescribeGroups), and the shards asked the way inference scatters.

Delivery is at-least-once: a worker killed between producing and committing leaves its
uncommitted records to the partition's next owner, which does them again, and so can a
survivor whose batch outlasts the rebalance the kill sets off (seen on a loaded machine:
documents produced after the kill embedded twice). So each document version appears on
docs.redacted.v1 and chunks.embedded.v1 at least once; extra copies are few and must say
the same thing. The audit trail holds exactly one leaf per
version all the same: redaction skips input offsets an audit record already covers, reading
its chain ends back from audit.batches.v1 after every rebalance (services/redaction/agents.py
Chains). This test found two ways a worker kept a stale chain end and audited a dead
worker's range a second time: a partition given back at the very offset it had last seen
there, and a partition it had loaded at start but never owned until a kill handed it over.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from scripts.benchlib.scale import HEAVY, SOURCE, ScaleMesh, document, wait
from shared.contract.audit_signing import check
from shared.contract.codec import decode
from shared.contract.records import (
    Anchor,
    AuditBatch,
    AuditLeaf,
    EmbeddedChunkSet,
    decode_vector,
)
from shared.contract.topics import AUDIT_BATCHES, CHUNKS_EMBEDDED, DOCS_REDACTED, LEDGER_ANCHORS
from tests.support.anvil import Anvil, needs_anvil, running_anvil

pytestmark = [pytest.mark.integration, needs_anvil, pytest.mark.timeout(600)]
TIMEOUT_S = 180.0
# Short sessions: a killed worker's partitions move after 6 s instead of 10.
ENV = {"STREAMRAG_KAFKA_SESSION_TIMEOUT_S": "6"}
WAVE = 12  # documents per step; the last step sends two of these, the kills between


@pytest.fixture(scope="module")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anvil]:
    with running_anvil(tmp_path_factory.mktemp("scale-anvil")) as node:
        yield node


class Run:
    """What the steps did: documents produced (in order), and the kills."""

    def __init__(self, mesh: ScaleMesh) -> None:
        self.mesh = mesh
        self.produced: list[str] = []
        self.killed: dict[str, int] = {}  # stage -> exit code
        self.steps: list[dict[str, int]] = []  # live workers per stage, checked balanced

    def send(self, tag: str, n: int) -> list[str]:
        docs = [document(i, tag) for i in range(n)]
        self.mesh.produce(docs)
        self.produced += [d.doc_id for d in docs]
        return [d.doc_id for d in docs]

    def redacted(self) -> set[str]:
        return {json.loads(r.value)["doc_id"] for r in self.mesh.read(DOCS_REDACTED)}

    def embedded(self) -> set[str]:
        return {json.loads(r.value)["doc_id"] for r in self.mesh.read(CHUNKS_EMBEDDED)}

    def searchable(self) -> set[str]:
        """Doc ids whose chunks the shards hold, once every partition's shard answers
        without error (else nothing)."""
        replies = self.mesh.search_all()
        parts = SOURCE["retrieval"].partitions
        if len(replies) != parts or any(r.error or not r.results for r in replies):
            return set()
        return {h.doc_id for r in replies for res in r.results for h in res.hits}

    def through(self, ids: list[str]) -> None:
        """Until every one of `ids` is redacted, embedded and searchable."""
        want = set(ids)
        wait(lambda: want <= self.redacted(), "every document redacted", TIMEOUT_S, self.mesh)
        wait(lambda: want <= self.embedded(), "every document embedded", TIMEOUT_S, self.mesh)
        wait(lambda: want <= self.searchable(), "every document searchable", TIMEOUT_S,
             self.mesh)

    def settle(self) -> None:
        """Until each heavy stage's group holds exactly its live workers, each partition
        owned by one of them."""
        for stage in HEAVY:
            wait(lambda s=stage: self.mesh.balanced(s), f"{stage}'s group balanced over "
                 f"{len(self.mesh.workers[stage])} workers", TIMEOUT_S, self.mesh)
        self.steps.append({s: len(self.mesh.workers[s]) for s in HEAVY})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, anvil: Anvil) -> Iterator[Run]:
    mesh = ScaleMesh(tmp_path_factory.mktemp("scale-mesh"), ENV, anvil.url)
    out = Run(mesh)
    try:
        mesh.start()
        for stage in HEAVY:
            mesh.add(stage)
        out.settle()  # 1 worker each
        out.through(out.send("one", WAVE))
        for stage in HEAVY:
            mesh.add(stage)
        out.settle()  # 2 each
        out.through(out.send("two", WAVE))
        for stage in HEAVY:
            mesh.add(stage, 2)
        out.settle()  # 4 each
        first = out.send("four", WAVE)
        # Kill once each stage has produced something of this wave (it is consuming).
        for stage, seen in (("redaction", out.redacted), ("embedding", out.embedded),
                            ("retrieval", out.searchable)):
            wait(lambda f=seen: set(first) & f(), f"{stage} at work on the wave", TIMEOUT_S,
                 mesh)
            out.killed[stage] = mesh.kill9(mesh.workers[stage][0])
        second = out.send("four-after-kill", WAVE)
        out.settle()  # 3 each: the dead members evicted, their partitions moved
        out.through(first + second)
        yield out
    finally:
        mesh.stop()


def test_each_step_balanced_every_partition_over_the_live_workers(run: Run) -> None:
    assert run.steps == [dict.fromkeys(HEAVY, n) for n in (1, 2, 4, 3)]
    assert run.killed == dict.fromkeys(HEAVY, -9)
    assert not run.mesh.crashed()
    # The 3 live workers share the partitions evenly (4 by default: 1, 1 and 2).
    for stage in HEAVY:
        shares = sorted(len(m.get(SOURCE[stage].name, set())) for m in run.mesh.assignment(stage))
        parts = SOURCE[stage].partitions
        assert len(shares) == 3 and sum(shares) == parts, (stage, shares)
        assert shares[-1] - shares[0] <= 1 and shares[0] >= 1, (stage, shares)


def copies(records: list[Any]) -> dict[tuple[str, int], list[Any]]:
    out: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for r in records:
        value = json.loads(r.value)
        out[(value["doc_id"], value["version"])].append((r.partition, value))
    return out


def test_every_version_redacted_and_embedded_duplicates_identical(run: Run) -> None:
    for spec in (DOCS_REDACTED, CHUNKS_EMBEDDED):
        found = copies(run.mesh.read(spec))
        assert set(found) == {(d, 1) for d in run.produced}, spec.name
        extra = {key: got for key, got in found.items() if len(got) > 1}
        # Redone at most twice per stage up the line (redaction's redo doubles what embedding
        # is given), never a version that was not produced.
        assert all(len(got) <= 4 for got in extra.values()), (spec.name, sorted(extra))
        for got in extra.values():
            assert len({p for p, _ in got}) == 1  # keyed by doc id: one partition
            first = got[0][1]
            for _, other in got[1:]:
                same_content(spec.name, first, other)


def same_content(topic: str, a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two copies of one document version say the same thing (a redaction batch id and
    ingest bookkeeping may differ; vectors to float rounding of a different batch)."""
    if topic == DOCS_REDACTED.name:
        skip = {"batch_id"}
        assert {k: v for k, v in a.items() if k not in skip} == \
            {k: v for k, v in b.items() if k not in skip}
        assert "Maria Lopez" not in a["text"] and "415-555" not in a["text"]
        return
    x, y = EmbeddedChunkSet.model_validate(a), EmbeddedChunkSet.model_validate(b)
    assert [(c.chunk_id, c.text) for c in x.chunks] == [(c.chunk_id, c.text) for c in y.chunks]
    for c, d in zip(x.chunks, y.chunks, strict=True):
        assert float(np.dot(decode_vector(c.vector), decode_vector(d.vector))) == \
            pytest.approx(1.0, abs=1e-4)


def test_every_version_has_exactly_one_leaf_in_one_chain_of_signed_anchored_batches(
        run: Run) -> None:
    """Every document version has one leaf in a signed batch the ledger anchored, though
    the killed workers' ranges were taken over by others, and each partition's batches
    form one chain (no two batches extend the same root)."""
    def anchored() -> bool:
        records = [decode(AuditBatch, r.value) for r in run.mesh.read(AUDIT_BATCHES)]
        batches = {b.batch_id for b in records}
        covered = {leaf.doc_id for b in records for leaf in b.leaves}
        done = {decode(Anchor, r.value).batch_id for r in run.mesh.read(LEDGER_ANCHORS)}
        return set(run.produced) <= covered and batches <= done
    # Searchable is no word on the audit trail: audit.batches.v1 is keyed by partition and
    # written at a batch's close (a redone batch's after the rebalance), so wait for a record
    # of every document, not only for the records already there to be anchored.
    wait(anchored, "every document in an audit batch and every batch anchored", TIMEOUT_S,
         run.mesh)
    batches = {b.batch_id: b for b in (decode(AuditBatch, r.value)
                                       for r in run.mesh.read(AUDIT_BATCHES))}
    [signer] = {b.signer for b in batches.values()}
    assert all(check(b, frozenset({signer.lower()})) is None for b in batches.values())
    leaves: dict[str, list[AuditLeaf]] = defaultdict(list)
    for b in batches.values():
        for leaf in b.leaves:
            leaves[leaf.doc_id].append(leaf)
    assert set(leaves) == set(run.produced)
    twice = sorted(doc for doc, got in leaves.items() if len(got) > 1)
    assert not twice, [(b.batch_id, b.prev_root[:8]) for b in batches.values()
                       if any(x.doc_id in twice for x in b.leaves)]
    extended = Counter((b.partition, b.prev_root) for b in batches.values())
    assert max(extended.values()) == 1, extended


def test_a_query_reaches_every_document_once_across_the_retrieval_workers(run: Run) -> None:
    replies = run.mesh.search_all()
    assert sorted(r.partition for r in replies) == list(range(SOURCE["retrieval"].partitions))
    hits = [h for r in replies for res in r.results for h in res.hits]
    chunks = Counter(h.chunk_id for h in hits)
    assert set(chunks.values()) == {1}  # no shard held by two workers, none answered twice
    assert {h.doc_id for h in hits} == set(run.produced)
