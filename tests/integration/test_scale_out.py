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
The fault schedule below found a third: a worker woken from a stop longer than its session
timeout finishes the batch in hand (Faust's revocation waits for it) and audits, from its
stale chain end, offsets the partition's new owner has audited already; two batches extend
one root. Redaction has to give up that batch once its consumer has heard that the group no
longer knows its member id.

Then, on the 3 workers a stage, a seeded random schedule of faults runs while documents
(and a few records that do not parse) stream in: kill -9, SIGSTOP held past the session
timeout then SIGCONT, SIGTERM, and restarts (a worker gone started again under its name and
data dir, or a rolling SIGTERM-and-start), never taking a stage's last running worker away
for good; a worker that exits on its own meanwhile is restarted, as a supervisor would. The
seed comes from STREAMRAG_TEST_FAULT_SEED (random when unset) and every failure names it with
the schedule it ran, to replay. Throughout, a sampler reads each group's committed offsets
from the broker (tests/support/commits.py): none may ever pass an input record that had
neither an output nor a dead letter on the broker.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from scripts.benchlib.scale import HEAVY, SOURCE, ScaleMesh, document, wait
from services.cli.procs import Child
from shared.contract.audit_signing import check
from shared.contract.codec import decode
from shared.contract.records import (
    Anchor,
    AuditBatch,
    AuditLeaf,
    EmbeddedChunkSet,
    RedactedDocument,
    decode_vector,
)
from shared.contract.sealed import open_chunks, open_document
from shared.contract.topics import (
    AUDIT_BATCHES,
    CHUNKS,
    CHUNKS_EMBEDDED,
    DEADLETTER,
    DOCS_NORMALIZED,
    DOCS_REDACTED,
    LEDGER_ANCHORS,
    SERVICES,
)
from shared.keys.settings import KeySettings
from shared.keys.store import VersionKeys
from tests.support.anvil import Anvil, needs_anvil, running_anvil
from tests.support.commits import Flow, Sampler, dead_letters, passed

pytestmark = [pytest.mark.integration, needs_anvil, pytest.mark.timeout(600)]
TIMEOUT_S = 180.0
# Short sessions: a killed worker's partitions move after 6 s instead of 10.
SESSION_S = 6.0
ENV = {"STREAMRAG_KAFKA_SESSION_TIMEOUT_S": f"{SESSION_S:g}"}
WAVE = 12  # documents per step; the last step sends two of these, the kills between
SEED_ENV = "STREAMRAG_TEST_FAULT_SEED"
SEED = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**31))
FAULT_STEPS = 14  # faults in the schedule, each after a trickle of documents
TRICKLE = 3  # documents sent before each fault
BAD_AT = (2, 7)  # the steps that also send a record that does not parse
PAUSE_S = 0.5  # how often the schedule looks at its workers
# Each group, what it consumes and where its outputs go: what its commits are checked on.
FLOWS = (Flow(SERVICES["redaction"], DOCS_NORMALIZED, DOCS_REDACTED),
         Flow(SERVICES["chunking"], DOCS_REDACTED, CHUNKS),
         Flow(SERVICES["embedding"], CHUNKS, CHUNKS_EMBEDDED))


@pytest.fixture(scope="module")
def anvil(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Anvil]:
    with running_anvil(tmp_path_factory.mktemp("scale-anvil")) as node:
        yield node


class Faults:
    """A seeded schedule of faults over the heavy stages' workers, and the supervisor that
    starts again whichever worker exits on its own meanwhile.

    Each step draws a fault, a stage and a worker: kill -9 and SIGTERM only while another
    worker of the stage runs (else a restart instead); SIGSTOP of a running worker,
    continued a random while past the session timeout, so the group has evicted it and its
    partitions moved before it wakes mid-batch; restart: a worker gone started again, or
    else a running one stopped with SIGTERM and started again. The seed fixes every draw;
    what a draw meets can still differ between runs with the machine's pace (whether a
    worker sent SIGTERM has exited yet, say), so a replay runs the same choices, not
    always the same faults.
    """

    KINDS = ("kill9", "sigstop", "sigterm", "restart")

    def __init__(self, mesh: ScaleMesh, seed: int) -> None:
        self.mesh, self.rng = mesh, random.Random(seed)
        self.started = time.monotonic()
        self.paused: dict[str, tuple[Child, float]] = {}  # name -> (worker, continue at)
        self.leaving: dict[str, tuple[Child, bool]] = {}  # sent SIGTERM: name -> (, restart?)
        self.down: dict[str, list[Child]] = {stage: [] for stage in HEAVY}
        self.log: list[str] = []
        self.crashes: list[str] = []  # workers that exited on their own, with their logs

    def note(self, what: str) -> None:
        self.log.append(f"t+{time.monotonic() - self.started:.0f}s {what}")

    def running(self, stage: str) -> list[Child]:
        return [c for c in self.mesh.workers[stage] if c.name not in self.paused]

    def allows(self, kind: str, stage: str) -> bool:
        running = len(self.running(stage))
        return {"kill9": running >= 2, "sigterm": running >= 2, "sigstop": running >= 1,
                "restart": bool(self.down[stage]) or running >= 1}[kind]

    def strike(self) -> None:
        # The same draws every step, whatever they meet: a replay makes the same choices.
        kind, stage = self.rng.choice(self.KINDS), self.rng.choice(HEAVY)
        pick, held = self.rng.random(), SESSION_S + self.rng.uniform(1.5, 5.0)
        if not self.allows(kind, stage):
            if not self.allows("restart", stage):  # its only worker is stopped already
                self.note(f"{kind} of {stage}: nothing to do")
                return
            kind = "restart"
        if kind == "restart" and self.down[stage]:
            gone = self.down[stage].pop(int(pick * len(self.down[stage])))
            self.mesh.restart(gone)
            self.note(f"restart {gone.name}")
            return
        running = self.running(stage)
        child = running[int(pick * len(running))]
        if kind == "kill9":
            self.mesh.kill9(child)
            self.down[stage].append(child)
        elif kind == "sigstop":
            self.mesh.pause(child)
            self.paused[child.name] = (child, time.monotonic() + held)
            kind = f"sigstop for {held:.1f}s"
        else:  # sigterm, or a restart of a running worker: SIGTERM, then start it again
            self.mesh.terminate(child)
            self.leaving[child.name] = (child, kind == "restart")
            kind = "sigterm, then start again" if kind == "restart" else kind
        self.note(f"{kind} {child.name}")

    def tick(self) -> None:
        """Continue the paused workers due, follow those leaving, restart the crashed."""
        now = time.monotonic()
        for name, (child, due) in list(self.paused.items()):
            if now >= due:
                del self.paused[name]
                self.mesh.resume(child)
                self.note(f"sigcont {name}")
        for name, (child, again) in list(self.leaving.items()):
            if not child.alive():
                del self.leaving[name]
                self.mesh.leaving.remove(child)
                self.note(f"{name} exited {child.popen.returncode}")
                if again:
                    self.mesh.restart(child)
                    self.note(f"start {name} again")
                else:
                    self.down[child.name.rsplit("-", 1)[0]].append(child)
        for stage in HEAVY:
            for child in [c for c in self.mesh.workers[stage] if not c.alive()]:
                self.crashes.append(f"{child.name} exited {child.popen.returncode} on its "
                                    f"own, log {child.log_path}")
                self.note(f"{child.name} crashed ({child.popen.returncode}): restart")
                self.mesh.drop(child)
                self.mesh.restart(child)

    def idle(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.tick()
            time.sleep(PAUSE_S)

    def finish(self) -> None:
        """Every paused worker continued, every leaving one gone, and each stage with a
        worker running."""
        def calm() -> bool:
            self.tick()
            return not (self.paused or self.leaving)
        wait(calm, f"paused workers continued, and {sorted(self.leaving)} gone after SIGTERM",
             TIMEOUT_S, self.mesh)
        for stage in HEAVY:
            if not self.mesh.workers[stage]:
                self.mesh.restart(self.down[stage].pop())
                self.note(f"restart {self.mesh.workers[stage][0].name} (the stage had none)")


class Run:
    """What the steps did: documents produced (in order), the kills and the faults, and
    the committed offsets sampled throughout."""

    def __init__(self, mesh: ScaleMesh) -> None:
        self.mesh = mesh
        self.produced: list[str] = []
        self.bad: list[str] = []  # keys of records sent that do not parse
        self.killed: dict[str, int] = {}  # stage -> exit code
        self.steps: list[dict[str, int]] = []  # live workers per stage, checked balanced
        self.shares: dict[str, list[int]] = {}  # partitions per worker, at 3 workers each
        self.faults = Faults(mesh, SEED)
        self.tick: Callable[[], None] = lambda: None  # supervision while waiting
        self.sampler = Sampler(mesh.bootstrap, tuple(SERVICES[s] for s in
                                                     ("redaction", "chunking", "embedding",
                                                      "retrieval")),
                               (DOCS_REDACTED, CHUNKS, CHUNKS_EMBEDDED))

    def replay(self) -> str:
        """What a failure message needs to run the same schedule again."""
        f = self.faults
        return (f"{SEED_ENV}={SEED}; faults: {f.log}; crashes: {f.crashes}; "
                f"logs under {self.mesh.run_dir / 'logs'}")

    def why(self, *what: object) -> str:
        """A failure message: what went wrong, then how to run the same schedule again."""
        return f"{SEED_ENV}={SEED}: {'; '.join(map(str, what))}\n{self.replay()}"

    def send(self, tag: str, n: int) -> list[str]:
        docs = [document(i, tag) for i in range(n)]
        self.mesh.produce(docs)
        self.produced += [d.doc_id for d in docs]
        return [d.doc_id for d in docs]

    def send_bad(self, key: str) -> None:
        self.mesh.produce_raw([(key.encode(), b'{"doc_id": "' + key.encode() + b'", "vers')])
        self.bad.append(key)

    def dead(self) -> dict[str, list[str]]:
        """Doc id (the dead letter's key) -> the reasons it was dead-lettered for."""
        out: dict[str, list[str]] = defaultdict(list)
        for _, _, letter in dead_letters(self.mesh.read(DEADLETTER)):
            out[letter.key or ""].append(f"{letter.stage}: {letter.reason}")
        return out

    def settled(self) -> set[str]:
        """The documents produced that are not dead-lettered: every one must be searchable."""
        return set(self.produced) - set(self.dead())

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
        """Until every one of `ids` is redacted, embedded and searchable (or dead-lettered)."""
        def done(seen: Callable[[], set[str]]) -> bool:
            self.tick()
            return set(ids) - set(self.dead()) <= seen()
        for what, seen in (("redacted", self.redacted), ("embedded", self.embedded),
                           ("searchable", self.searchable)):
            wait(lambda f=seen: done(f), f"every document {what}", TIMEOUT_S, self.mesh)

    def settle(self) -> None:
        """Until each heavy stage's group holds exactly its live workers, each partition
        owned by one of them."""
        def balanced(stage: str) -> bool:
            self.tick()
            return self.mesh.balanced(stage)
        for stage in HEAVY:
            wait(lambda s=stage: balanced(s), f"{stage}'s group balanced over "
                 f"{len(self.mesh.workers[stage])} workers", TIMEOUT_S, self.mesh)
        self.steps.append({s: len(self.mesh.workers[s]) for s in HEAVY})

    def chaos(self) -> None:
        """The fault schedule over the workers while documents trickle in, then every
        document through."""
        self.tick = self.faults.tick
        for step in range(FAULT_STEPS):
            self.send(f"fault{step}", TRICKLE)
            if step in BAD_AT:
                self.send_bad(f"bad-{step}")
            self.faults.strike()
            self.faults.idle(self.faults.rng.uniform(1.0, 4.0))
        self.faults.finish()
        self.settle()
        self.through(self.produced)


def shares(mesh: ScaleMesh, stage: str) -> list[int]:
    """Partitions per member of the stage's group, fewest first; [] while rebalancing."""
    return sorted(len(m.get(SOURCE[stage].name, set())) for m in mesh.assignment(stage))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, anvil: Anvil) -> Iterator[Run]:
    mesh = ScaleMesh(tmp_path_factory.mktemp("scale-mesh"), ENV, anvil.url)
    out = Run(mesh)
    print(f"{SEED_ENV}={SEED}")  # in the captured output even if the fixture times out
    try:
        mesh.start()
        out.sampler.start()
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
        out.shares = {stage: wait(lambda s=stage: shares(mesh, s), f"{stage}'s shares",
                                  TIMEOUT_S, mesh) for stage in HEAVY}
        try:
            out.chaos()
        except AssertionError as exc:
            raise AssertionError(out.why(exc)) from exc
        finally:
            (mesh.run_dir / "faults.log").write_text("\n".join(out.faults.log) + "\n")
        print(out.replay())  # shown with -rP
        yield out
    finally:
        out.sampler.stop()
        mesh.stop()


def test_each_step_balanced_every_partition_over_the_live_workers(run: Run) -> None:
    assert run.steps[:4] == [dict.fromkeys(HEAVY, n) for n in (1, 2, 4, 3)]
    assert run.killed == dict.fromkeys(HEAVY, -9)
    # The 3 live workers shared the partitions evenly (4 by default: 1, 1 and 2).
    for stage, shares in run.shares.items():
        parts = SOURCE[stage].partitions
        assert len(shares) == 3 and sum(shares) == parts, (stage, shares)
        assert shares[-1] - shares[0] <= 1 and shares[0] >= 1, (stage, shares)
    # After the faults: each stage balanced over whatever workers it has left (1 at least).
    [after] = run.steps[4:]
    assert all(n >= 1 for n in after.values()), run.why(after)
    assert not run.mesh.crashed(), run.why(run.mesh.crashed())


def test_every_record_that_does_not_parse_dead_lettered_with_its_offset_and_a_reason(
        run: Run) -> None:
    letters = {(d.partition, d.offset): d for _, _, d in dead_letters(run.mesh.read(DEADLETTER))
               if d.source_topic == DOCS_NORMALIZED.name}
    bad = [r for r in run.mesh.read(DOCS_NORMALIZED) if r.key.decode() in run.bad]
    assert len(bad) == len(run.bad) == len(BAD_AT)
    for r in bad:
        letter = letters.get((r.partition, r.offset))
        assert letter is not None, run.why(r.key, r.partition, r.offset)
        assert letter.stage == "redaction" and letter.reason and letter.key == r.key.decode()


def copies(records: list[Any]) -> dict[tuple[str, int], list[Any]]:
    out: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for r in records:
        value = json.loads(r.value)
        out[(value["doc_id"], value["version"])].append((r.partition, value))
    return out


def test_every_version_redacted_and_embedded_or_dead_lettered_duplicates_identical(
        run: Run) -> None:
    dead = run.dead()
    for spec in (DOCS_REDACTED, CHUNKS_EMBEDDED):
        found = copies(run.mesh.read(spec))
        # Never a version that was not produced; every one produced, unless dead-lettered
        # (with a reason: the stage and why).
        assert set(found) <= {(d, 1) for d in run.produced}, run.why(spec.name)
        missing = sorted(d for d in run.produced if (d, 1) not in found)
        assert all(dead.get(d) and all(dead[d]) for d in missing), \
            run.why(spec.name, missing, {d: dead.get(d) for d in missing})
        extra = {key: got for key, got in found.items() if len(got) > 1}
        faulted = [len(got) for key, got in found.items() if key[0].startswith("fault")]
        print(f"{spec.name}: {sum(len(g) for g in found.values())} records for {len(found)} "
              f"versions; under the fault schedule {sum(faulted)} for {len(faulted)}")
        # Before the faults, redone at most twice per stage up the line (redaction's redo
        # doubles what embedding is given); the faults may redo a version more often.
        before = {key: got for key, got in extra.items() if not key[0].startswith("fault")}
        assert all(len(got) <= 4 for got in before.values()), (spec.name, sorted(before))
        for got in extra.values():
            assert len({p for p, _ in got}) == 1  # keyed by doc id: one partition
            first = opened(run.mesh, got[0][1])
            for _, other in got[1:]:
                same_content(spec.name, first, opened(run.mesh, other))


def opened(mesh: ScaleMesh, record: dict[str, Any]) -> dict[str, Any]:
    """A copy read as the mesh reads it: sealed text and vectors opened with its key store
    (the copies of a version are sealed alike; opened, their texts can be compared)."""
    if not record.get("sealed"):
        return record
    keys = VersionKeys.from_settings(KeySettings(path=mesh.run_dir / "keys" /
                                                 "versions.sqlite"))
    try:
        if "chunks" in record:
            return open_chunks(EmbeddedChunkSet.model_validate(record), keys).model_dump(
                mode="json")
        return open_document(RedactedDocument.model_validate(record), keys).model_dump(
            mode="json")
    finally:
        keys.close()


def same_content(topic: str, a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two copies of one document version say the same thing (a redaction batch id and
    ingest bookkeeping may differ; vectors to float rounding of a different batch)."""
    if topic == DOCS_REDACTED.name:
        skip = {"batch_id"}
        assert {k: v for k, v in a.items() if k not in skip} == \
            {k: v for k, v in b.items() if k not in skip}
        assert "Maria Lopez" not in a["text"] and "415-555" not in a["text"]
        assert not a.get("sealed")  # compared opened, not as ciphertext
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
        return run.settled() <= covered and batches <= done
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
    assert run.settled() <= set(leaves) <= set(run.produced), \
        run.why(sorted(run.settled() - set(leaves)), sorted(set(leaves) - set(run.produced)))
    twice = sorted(doc for doc, got in leaves.items() if len(got) > 1)
    assert not twice, run.why(twice, [(b.batch_id, b.prev_root[:8]) for b in batches.values()
                                      if any(x.doc_id in twice for x in b.leaves)])
    extended = Counter((b.partition, b.prev_root) for b in batches.values())
    assert max(extended.values()) == 1, run.why(extended)


def test_a_query_reaches_every_document_once_across_the_retrieval_workers(run: Run) -> None:
    replies = run.mesh.search_all()
    assert sorted(r.partition for r in replies) == list(range(SOURCE["retrieval"].partitions))
    hits = [h for r in replies for res in r.results for h in res.hits]
    chunks = Counter(h.chunk_id for h in hits)
    # No shard held by two workers, none answered twice.
    assert set(chunks.values()) == {1}, run.why({c for c, n in chunks.items() if n > 1})
    found = {h.doc_id for h in hits}
    assert found == run.settled(), run.why(sorted(run.settled() - found),
                                           sorted(found - run.settled()))


def test_no_commit_ever_passed_a_record_neither_produced_downstream_nor_dead_lettered(
        run: Run) -> None:
    """Every group's committed offsets, sampled from the first worker to the last document
    through the faults, covered only input records whose output (or dead letter) was on
    the broker already; and by the end each group has committed its whole input, so the
    samples saw commits move."""
    sources = {f.source.name: run.mesh.read(f.source) for f in FLOWS}
    ends = {f.group: {(r.topic, r.partition): r.offset + 1 for r in sources[f.source.name]}
            for f in FLOWS}

    def caught_up() -> bool:
        assert run.sampler.sampling()
        got = run.sampler.samples[-1].committed if run.sampler.samples else {}
        return all(all(got.get(g, {}).get(tp) == end for tp, end in e.items())
                   for g, e in ends.items())
    wait(caught_up, "every group's commits at the end of its input", TIMEOUT_S, run.mesh)
    run.sampler.stop()
    samples = run.sampler.samples
    dead = dead_letters(run.mesh.read(DEADLETTER))
    for flow in FLOWS:
        early = passed(flow, samples, sources[flow.source.name], run.mesh.read(flow.output),
                       dead)
        assert not early, run.why(*early)
    # retrieval keeps its place in its shards' snapshots and never commits its input.
    retrieval = {tp for s in samples for tp in s.committed.get(SERVICES["retrieval"], {})}
    assert not {tp for tp in retrieval if tp[0] == CHUNKS_EMBEDDED.name}, retrieval
