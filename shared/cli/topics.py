"""`streamrag topics`: create the contract's topics and show their partition counts;
`streamrag topics --grow N [--dry-run]`: add partitions to the document topics of a stopped,
drained mesh (docs/design/growing-partitions.md; the plan and re-homing rules are
shared/kafka/grow.py).

The steps, each safe to run again after a crash (progress is kept in `--state-dir`):
1. refuse unless no worker of this machine's mesh runs (RUN_DIR/pids), every consumer group
   is empty (DescribeGroups; on the embedded broker, which keeps stopped members listed, a
   probe join first makes the coordinator drop them) and every group has committed every
   record of the grown topics (committed offset = the log's true end);
2. save every group's committed offsets on the grown topics (once);
3. grow each topic: CreatePartitions where the broker has it; on a broker without it (the
   embedded Tansu) the topic is copied to a spool, deleted, created with N partitions and
   refilled partition by partition, which gives every record its old offset back;
4. commit the saved offsets again (a re-created topic lost them);
5. re-home each key's newest record: ingest's doc_versions changelog is re-created holding
   each key's newest record once, on its new partition; chunks.v1 and chunks.embedded.v1
   get a copy on the new partition and a retirement on the old one, and the groups that
   consume chunks.v1 are moved past those writes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.errors import IncompatibleBrokerVersion, TopicAlreadyExistsError

from shared.cli import admin as create
from shared.cli.journal import Frame, Journal, read_frames
from shared.cli.settings import MeshSettings
from shared.contract.topics import all_topic_specs
from shared.errors import InvalidInput
from shared.kafka import grow
from shared.kafka.admin import commit_offsets
from shared.kafka.changelog_tail import true_ends
from shared.settings import KafkaSettings

STATE_FILE = "grow.json"
Say = Callable[[str], None]


def extend_parser(p: argparse.ArgumentParser) -> None:
    """The `topics` command's growth options (the command itself is shared.cli.admin's)."""
    p.add_argument("--grow", type=int, metavar="N", default=None,
                   help="add partitions to the document topics (mesh stopped, lag 0)")
    p.add_argument("--dry-run", action="store_true", help="with --grow: print the plan only")
    p.add_argument("--state-dir", type=Path, default=None,
                   help="where --grow keeps its progress (default: RUN_DIR/grow)")


def run(args: argparse.Namespace) -> int:
    kafka = KafkaSettings()
    if args.grow is None:
        code = create.run_topics(args)
        print(show(asyncio.run(topic_counts(kafka))))
        return code
    run_dir = MeshSettings().run_dir
    state_dir = args.state_dir or run_dir / "grow"
    try:
        return asyncio.run(grow_mesh(kafka, args.grow, state_dir, run_dir,
                                     dry_run=args.dry_run))
    except InvalidInput as exc:
        print(f"refused: {exc.reason}: {exc.detail or ''}".rstrip(": "))
        return 2


def show(counts: dict[str, int]) -> str:
    """Each contract topic: its partitions on the broker and in the settings, its group."""
    lines = [f"{'topic':<58} {'broker':>6} {'setting':>7}  group"]
    for spec in all_topic_specs():
        have = counts.get(spec.name)
        grows = " (streamrag topics --grow)" if spec.name in grow.GROWN else ""
        lines.append(f"{spec.name:<58} {have if have is not None else 'none':>6} "
                     f"{spec.partitions:>7}  {spec.group}{grows}")
    return "\n".join(lines)


async def _admin(kafka: KafkaSettings) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **kafka.client_options())
    await admin.start()
    return admin


async def topic_counts(kafka: KafkaSettings) -> dict[str, int]:
    admin = await _admin(kafka)
    try:
        names = [t for t in await admin.list_topics() if not t.startswith("__")]
        meta = await admin.describe_topics(names) if names else []
        return {m["topic"]: len(m["partitions"]) for m in meta if not m["error_code"]}
    finally:
        await admin.close()


async def _ends(kafka: KafkaSettings, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """True end offsets (the embedded broker reports short ones after batched produces)."""
    if not tps:
        return {}
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False,
                              **kafka.client_options())
    await reader.start()
    try:
        reported = await reader.end_offsets(tps)
    finally:
        await reader.stop()
    ends = await true_ends(kafka, reported)
    return {TopicPartition(tp.topic, tp.partition): n for tp, n in ends.items()}


async def _members(admin: AIOKafkaAdminClient, group: str) -> int | None:
    try:
        desc = (await admin.describe_consumer_groups([group]))[0]
        groups = getattr(desc, "groups", None) or []
        return len(groups[0][5]) if groups else 0
    except Exception:  # noqa: BLE001 - a broker without DescribeGroups: unknown, refused
        return None


def running_workers(run_dir: Path) -> list[str]:
    """The service processes of this machine's embedded mesh (`streamrag up`'s pid files
    under RUN_DIR/pids) that are still running: the check that does not depend on what a
    broker says about group members."""
    out = []
    for pid_file in sorted((run_dir / "pids").glob("*.pid")):
        pid = int(pid_file.read_text().strip() or 0)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes() if pid else b""
        except OSError:
            continue  # gone
        if b"services." in cmdline:
            out.append(f"{pid_file.stem} (pid {pid}, {run_dir / 'pids'})")
    return out


class _Probe(AbstractPartitionAssignor):
    """A member that takes nothing: it joins a group only to make the coordinator check who
    is still there."""

    name = "streamrag-grow-probe"

    @classmethod
    def assign(cls, cluster: Any, members: dict[str, Any]) -> dict[str, Any]:
        return {m: ConsumerProtocolMemberAssignment(0, [], b"") for m in members}

    @classmethod
    def metadata(cls, topics: Any) -> Any:
        return ConsumerProtocolMemberMetadata(0, sorted(topics), b"")

    @classmethod
    def on_assignment(cls, assignment: Any) -> None:
        pass


# The probe speaks the protocols the mesh's consumers do (Faust's, aiokafka's defaults), so
# the coordinator can pick one all members share.
PROBES = tuple(type(f"Probe_{n}", (_Probe,), {"name": n}) for n in ("faust", "roundrobin", "range"))


async def keeps_stopped_members(kafka: KafkaSettings) -> bool:
    """Whether the broker is the embedded one, which lists a stopped Faust worker as a member
    until the next rebalance (Apache Kafka expires it after its session timeout, so there a
    listed member is a live one). Told by the API it lacks: CreatePartitions."""
    admin = await _admin(kafka)
    try:
        await admin.create_partitions({grow.GROWN[0]: NewPartitions(1)}, validate_only=True)
    except IncompatibleBrokerVersion:
        return True
    except Exception:  # noqa: BLE001 - any answer (a shrink is refused): the API is there
        return False
    finally:
        await admin.close()
    return False


async def live_members(kafka: KafkaSettings, group: str, topic: str) -> int | None:
    """Members of `group` that are alive, found by joining it: the coordinator then waits for
    every member to rejoin and drops those that do not. (The embedded broker keeps a stopped
    Faust worker listed as a Stable member until the next rebalance; Apache Kafka expires it
    by itself.) A live worker may be dropped too if it rejoins late (Faust's rebalance
    timeout is short), but it joins again at its next heartbeat: so after the probe leaves,
    the group must still be empty a session timeout later. A live mesh rebalances for it."""
    probe = AIOKafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, group_id=group,
                             enable_auto_commit=False, partition_assignment_strategy=PROBES,
                             session_timeout_ms=int(kafka.session_timeout_s * 1000),
                             heartbeat_interval_ms=int(kafka.heartbeat_interval_s * 1000),
                             **kafka.client_options())
    await probe.start()
    try:
        await probe.getmany(timeout_ms=100)  # returns once the join is complete
        with_probe = await _described_members(kafka, group)
    finally:
        await probe.stop()  # leaves the group
    if with_probe is None or with_probe > 1:
        return None if with_probe is None else with_probe - 1
    await asyncio.sleep(kafka.session_timeout_s + kafka.rebalance_timeout_s)
    return await _described_members(kafka, group)


async def _described_members(kafka: KafkaSettings, group: str) -> int | None:
    admin = await _admin(kafka)
    try:
        return await _members(admin, group)
    finally:
        await admin.close()


async def _committed(kafka: KafkaSettings, group: str, tps: list[TopicPartition],
                     ) -> dict[TopicPartition, int]:
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=group,
                              enable_auto_commit=False, **kafka.client_options())
    await reader.start()
    try:
        got = await reader._coordinator.fetch_committed_offsets(set(tps))
        return {tp: meta.offset for tp, meta in got.items() if meta.offset >= 0}
    finally:
        await reader.stop()


async def group_states(kafka: KafkaSettings, counts: dict[str, int], *, lag: bool,
                       probe: bool = True,
                       ) -> tuple[list[grow.GroupState], dict[str, dict[TopicPartition, int]]]:
    """Every consumer group's members (with `probe`, those listed checked by a join) and
    (with `lag`) its lag on the grown topics, and its committed offsets there."""
    tps = [TopicPartition(t, p) for t in grow.GROWN if t in counts for p in range(counts[t])]
    admin = await _admin(kafka)
    try:
        names = sorted(g[0] for g in await admin.list_consumer_groups())
        members = {g: await _members(admin, g) for g in names}
    finally:
        await admin.close()
    probe = probe and await keeps_stopped_members(kafka)
    listed = [g for g, n in members.items() if n and probe]
    checked = await asyncio.gather(*(live_members(kafka, g, grow.GROWN[0]) for g in listed))
    members.update(zip(listed, checked, strict=True))
    ends = await _ends(kafka, tps) if lag else {}
    states, offsets = [], {}
    for g in names:
        offsets[g] = await _committed(kafka, g, tps)
        behind: dict[str, int] = {}
        for tp, o in offsets[g].items():
            behind[tp.topic] = behind.get(tp.topic, 0) + max(0, ends.get(tp, o) - o)
        states.append(grow.GroupState(g, members[g], behind))
    return states, offsets


class State:
    """The progress file: the target, the groups' saved offsets, the topics spooled/rebuilt."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / STATE_FILE
        self.data: dict[str, Any] = json.loads(self.path.read_text()) if self.path.exists() else {}

    @property
    def started(self) -> bool:
        return bool(self.data)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, sort_keys=True))
        tmp.replace(self.path)

    def offsets(self) -> dict[str, dict[TopicPartition, int]]:
        return {g: {TopicPartition(t, p): o for t, p, o in rows}
                for g, rows in self.data.get("offsets", {}).items()}

    def mark(self, what: str, topic: str, value: Any = True) -> None:
        self.data.setdefault(what, {})[topic] = value
        self.save()

    def done(self) -> None:
        self.path.unlink(missing_ok=True)
        shutil.rmtree(self.root / "spool", ignore_errors=True)


async def grow_mesh(kafka: KafkaSettings, target: int, state_dir: Path, run_dir: Path, *,
                    dry_run: bool = False, say: Say = print) -> int:
    """The whole procedure; 0 when done (or, dry, when it would run), 1 when refused."""
    state = State(state_dir)
    if state.started and state.data["target"] != target:
        msg = (f"a growth to {state.data['target']} is under way ({state.path}): run it "
               f"again with --grow {state.data['target']} to finish it")
        raise InvalidInput("growth_under_way", "grow", msg)
    counts = await topic_counts(kafka)
    for topic, n in state.data.get("spooled", {}).items():
        counts.setdefault(topic, n)  # deleted, not yet re-created: its old count
    steps = grow.plan(counts, target)
    workers = running_workers(run_dir)
    # Resuming: the lag was checked before the first change; only liveness is checked now.
    # With a worker of this machine running, the probe join (a rebalance) is spared it.
    groups, offsets = await group_states(kafka, counts, lag=not state.started,
                                         probe=not workers)
    problems = grow.quiet_problems(groups, workers)
    for step in steps:
        how = "stays" if not step.grows else f"{step.partitions} -> {step.target}"
        say(f"plan: {step.topic}: {how}")
    if dry_run:
        await _dry_rehome(kafka, counts, target, say)
    if problems:
        say("refused, the mesh is not quiet:\n  " + "\n  ".join(problems))
        return 1
    if dry_run:
        return 0
    if not state.started:
        state.data = {"target": target, "offsets": {
            g: sorted([tp.topic, tp.partition, o] for tp, o in got.items())
            for g, got in offsets.items() if got}}
        state.save()
    for step in steps:
        unfinished = step.topic in state.data.get("spooled", {}) and \
            step.topic not in state.data.get("rebuilt", {})
        if step.grows or unfinished:
            await _grow_topic(kafka, step, state, say)
    for group, saved in state.offsets().items():
        await commit_offsets(kafka, group, saved)
    say(f"offsets of {len(state.offsets())} group(s) committed as they were")
    for topic, rule in grow.REHOMED.items():
        await _rehome(kafka, topic, target, rule, say)
    await _skip_rehome(kafka, state, target, say)
    state.done()
    say(f"grown to {target} partitions; start the mesh with "
        f"STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS={target}")
    return 0


async def _grow_topic(kafka: KafkaSettings, step: grow.TopicStep, state: State, say: Say) -> None:
    admin = await _admin(kafka)
    try:
        if step.topic not in state.data.get("spooled", {}) and step.topic not in grow.REWRITTEN:
            try:
                await admin.create_partitions({step.topic: NewPartitions(step.target)})
                say(f"{step.topic}: {step.partitions} -> {step.target} partitions")
                return
            except IncompatibleBrokerVersion:
                pass  # the embedded broker: no CreatePartitions
    finally:
        await admin.close()
    await _rebuild(kafka, step, state, say)


async def _rebuild(kafka: KafkaSettings, step: grow.TopicStep, state: State, say: Say) -> None:
    """Copy out, delete, create with the new count, copy back at the same offsets."""
    spool = Journal(state.root / "spool")
    old = state.data.get("spooled", {}).get(step.topic)
    if old is None:
        old = step.partitions
        n = await _spool(kafka, step.topic, old, spool)
        state.mark("spooled", step.topic, old)
        say(f"{step.topic}: {n} record(s) copied to {spool.root}")
    spec = next(s for s in grow.grown_specs() if s.name == step.topic)
    admin = await _admin(kafka)
    try:
        counts = {m["topic"]: len(m["partitions"])
                  for m in await admin.describe_topics([step.topic]) if not m["error_code"]}
        if counts.get(step.topic, step.target) < step.target:
            await admin.delete_topics([step.topic])
            await _wait_gone(admin, step.topic)
        if step.topic not in counts or counts[step.topic] < step.target:
            await _create(admin, NewTopic(step.topic, step.target, kafka.replication_factor,
                                          topic_configs=spec.broker_config()))
    finally:
        await admin.close()
    routing = grow.REWRITTEN.get(step.topic)
    if routing is None:
        refilled = await _refill(kafka, step.topic, old, spool)
        done = f"{refilled} record(s) back at their offsets"
    else:
        writes = grow.rewrite_writes(_spooled(spool, step.topic, old), step.target, routing)
        await _produce(kafka, step.topic, writes)
        moved = sum(w.partition != grow.partition_of(routing(w.key), old) for w in writes)
        done = f"each key's newest record once on its partition: {len(writes)} key(s), " \
               f"{moved} moved"
    spool.close()
    state.mark("rebuilt", step.topic)
    shutil.rmtree(spool.root / "topics" / step.topic, ignore_errors=True)
    say(f"{step.topic}: re-created with {step.target} partitions, {done}")


def _spooled(spool: Journal, topic: str, partitions: int) -> list[grow.Rec]:
    out = []
    for p in range(partitions):
        path = spool.path(TopicPartition(topic, p))
        if path.exists():
            out += [grow.Rec(p, f.offset, f.key or b"", f.value, f.timestamp_ms, f.headers)
                    for f, _ in read_frames(path)]
    return out


async def _produce(kafka: KafkaSettings, topic: str, writes: list[grow.Write]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5, acks="all",
                                max_request_size=kafka.max_record_bytes, **kafka.client_options())
    await producer.start()
    try:
        futures = [await producer.send(topic, w.value, key=w.key, partition=w.partition,
                                       timestamp_ms=w.timestamp_ms or None,
                                       headers=list(w.headers)) for w in writes]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _create(admin: AIOKafkaAdminClient, topic: NewTopic) -> None:
    """Create a topic just deleted: Apache Kafka deletes asynchronously, and answers
    TopicAlreadyExists until it is gone."""
    for _ in range(100):
        try:
            await admin.create_topics([topic])
            return
        except TopicAlreadyExistsError:
            await asyncio.sleep(0.2)
    raise InvalidInput("create_failed", "topics", f"{topic.name} not created after its delete")


async def _wait_gone(admin: AIOKafkaAdminClient, topic: str) -> None:
    for _ in range(100):
        if topic not in await admin.list_topics():
            return
        await asyncio.sleep(0.1)
    raise InvalidInput("delete_failed", "topics", f"{topic} still listed after its delete")


async def _read_all(kafka: KafkaSettings, topic: str, partitions: int) -> list[Any]:
    """Every record of the topic's partitions, up to their true ends."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = await _ends(kafka, tps)
    out: list[Any] = []
    todo = [tp for tp in tps if ends[tp] > 0]
    if not todo:
        return out  # (a consumer stopped before any assignment raises CancelledError)
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False,
                                fetch_max_wait_ms=10,
                                max_partition_fetch_bytes=kafka.max_record_bytes,
                                **kafka.client_options())
    await consumer.start()
    try:
        consumer.assign(todo)
        await consumer.seek_to_beginning(*todo)
        while todo:
            batch = await consumer.getmany(*todo, timeout_ms=500)
            for records in batch.values():
                out += records
            todo = [tp for tp in todo if await consumer.position(tp) < ends[tp]]
        return out
    finally:
        await consumer.stop()


async def _spool(kafka: KafkaSettings, topic: str, partitions: int, spool: Journal) -> int:
    records = await _read_all(kafka, topic, partitions)
    for r in records:
        spool.append(TopicPartition(topic, r.partition), r)
    for p in range(partitions):
        spool.next_offset(TopicPartition(topic, p))  # an empty partition gets its file too
    spool.flush()
    return len(records)


async def _refill(kafka: KafkaSettings, topic: str, partitions: int, spool: Journal) -> int:
    """Produce each spooled partition's records from where the new partition ends, padding
    a gap below the old log start with empty records so that every offset comes back."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = await _ends(kafka, tps)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5, acks="all",
                                max_request_size=kafka.max_record_bytes, **kafka.client_options())
    await producer.start()
    sent = 0
    try:
        for tp in tps:
            path = spool.path(tp)
            frames = [f for f, _ in read_frames(path)] if path.exists() else []
            at, futures = ends[tp], []
            for frame in frames:
                if frame.offset < at:
                    continue
                while at < frame.offset:  # below the old log start, or a compacted hole
                    futures.append(await producer.send(topic, None, key=b"",
                                                       partition=tp.partition))
                    at += 1
                futures.append(await _send(producer, tp, frame))
                at += 1
            await asyncio.gather(*futures)
            sent += len(futures)
    finally:
        await producer.stop()
    return sent


async def _send(producer: AIOKafkaProducer, tp: TopicPartition, frame: Frame) -> Any:
    return await producer.send(tp.topic, frame.value, key=frame.key, partition=tp.partition,
                               timestamp_ms=frame.timestamp_ms, headers=list(frame.headers))


def _recs(records: list[Any]) -> list[grow.Rec]:
    return [grow.Rec(r.partition, r.offset, r.key or b"", r.value, r.timestamp,
                     tuple((n, bytes(v)) for n, v in r.headers or ())) for r in records]


async def _dry_rehome(kafka: KafkaSettings, counts: dict[str, int], target: int,
                      say: Say) -> None:
    for topic, routing in grow.REWRITTEN.items():
        old = counts.get(topic, 0)
        writes = grow.rewrite_writes(_recs(await _read_all(kafka, topic, old)), target, routing)
        moved = sum(w.partition != grow.partition_of(routing(w.key), old) for w in writes)
        say(f"plan: {topic}: re-created holding {len(writes)} key(s), {moved} of them on a "
            "new partition")
    for topic, rule in grow.REHOMED.items():
        records = _recs(await _read_all(kafka, topic, counts.get(topic, 0)))
        writes = grow.rehome_writes(records, target, rule.retire, rule.routing_key)
        copies = sum(w.kind == "copy" for w in writes)
        say(f"plan: {topic}: {copies} key(s) move, {len(writes) - copies} retired by "
            f"{rule.retire} on their old partition")


async def _rehome(kafka: KafkaSettings, topic: str, target: int, rule: grow.Rehomed,
                  say: Say) -> None:
    records = _recs(await _read_all(kafka, topic, target))
    writes = grow.rehome_writes(records, target, rule.retire, rule.routing_key)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5, acks="all",
                                max_request_size=kafka.max_record_bytes, **kafka.client_options())
    await producer.start()
    try:
        for kind in ("copy", "retire"):  # every copy on the broker before any retirement
            futures = [await producer.send(topic, w.value, key=w.key, partition=w.partition,
                                           timestamp_ms=w.timestamp_ms or None,
                                           headers=list(w.headers))
                       for w in writes if w.kind == kind]
            await asyncio.gather(*futures)
    finally:
        await producer.stop()
    copies = sum(w.kind == "copy" for w in writes)
    say(f"{topic}: {copies} key(s) re-homed, {len(writes) - copies} retired "
        f"({rule.retire})")


async def _skip_rehome(kafka: KafkaSettings, state: State, target: int, say: Say) -> None:
    """Groups that consume chunks.v1 start after the re-home writes: they applied every
    record before the growth, and the moved copies carry nothing new."""
    for topic in grow.SKIP_REHOME:
        tps = [TopicPartition(topic, p) for p in range(target)]
        ends = await _ends(kafka, tps)
        for group, saved in state.offsets().items():
            if any(tp.topic == topic for tp in saved):
                await commit_offsets(kafka, group, ends)
                say(f"group {group}: committed past the re-home writes on {topic}")
