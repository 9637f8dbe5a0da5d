"""`streamrag topics`: create the contract's topics and show their partition counts;
`streamrag topics --grow N [--dry-run]`: add partitions to the document topics of a stopped,
drained mesh (docs/design/growing-partitions.md; the plan and re-homing rules are
shared/kafka/grow.py).

The steps, each safe to run again after a crash (progress is kept in `--state-dir`):
1. refuse unless no worker of this machine's mesh runs (RUN_DIR/pids), every consumer group
   is empty (DescribeGroups) and every group has consumed every record of the grown topics
   it reads (committed offset = the log's end);
2. grow each topic with Kafka's CreatePartitions: every record keeps its partition and
   offset, every group its committed offsets; except ingest's doc_versions changelog, which
   is rewritten: each key's newest record is saved to the state directory, the topic is
   deleted, created with N partitions and filled with those records, each once, on its new
   partition;
3. re-home each key's newest record of chunks.v1 and chunks.embedded.v1: a copy on the new
   partition, then a retirement on the old one; the groups that consume chunks.v1 are moved
   past those writes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.errors import KafkaConnectionError

from services.cli import admin as create
from services.cli.settings import MeshSettings
from shared.contract.topics import all_topic_specs
from shared.errors import InvalidInput
from shared.kafka import grow
from shared.kafka.admin import commit_offsets, create_topics, new_topic
from shared.settings import KafkaSettings
from shared.worker.status_files import replace_file

STATE_FILE = "grow.json"
Say = Callable[[str], None]
Offsets = dict[TopicPartition, int]
WAIT_S = 30.0  # for the broker's metadata to show a topic grown, deleted or created


def extend_parser(p: argparse.ArgumentParser) -> None:
    """The `topics` command's growth options (the command itself is services.cli.admin's)."""
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
    except KafkaConnectionError:
        print(f"refused: no_broker: no Kafka broker answers at STREAMRAG_KAFKA_BOOTSTRAP="
              f"{kafka.bootstrap}: --grow needs the broker running and the workers stopped")
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
        return await _counts(admin)
    finally:
        await admin.close()


async def _counts(admin: AIOKafkaAdminClient, names: list[str] | None = None, *,
                  led: bool = False) -> dict[str, int]:
    """Partitions per topic (of `names`, default all but Kafka's internal ones); with `led`,
    only of the topics whose every partition has a leader."""
    if names is None:
        names = [t for t in await admin.list_topics() if not t.startswith("__")]
    meta = await admin.describe_topics(names) if names else []
    return {m["topic"]: len(m["partitions"]) for m in meta if not m["error_code"]
            and (not led or all(p["leader"] >= 0 for p in m["partitions"]))}


async def _offsets(kafka: KafkaSettings, tps: list[TopicPartition],
                   ) -> tuple[Offsets, Offsets]:
    """Each partition's log start and end."""
    if not tps:
        return {}, {}
    reader = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False,
                              **kafka.client_options())
    await reader.start()
    try:
        return await reader.beginning_offsets(tps), await reader.end_offsets(tps)
    finally:
        await reader.stop()


async def _ends(kafka: KafkaSettings, tps: list[TopicPartition]) -> Offsets:
    return (await _offsets(kafka, tps))[1]


async def _members(admin: AIOKafkaAdminClient, group: str) -> int | None:
    try:
        desc = (await admin.describe_consumer_groups([group]))[0]
        groups = getattr(desc, "groups", None) or []
        return len(groups[0][5]) if groups else 0
    except Exception:  # noqa: BLE001 - a broker that cannot say: unknown, refused
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


async def group_states(kafka: KafkaSettings, counts: dict[str, int], *, lag: bool,
                       ) -> tuple[list[grow.GroupState], dict[str, Offsets]]:
    """Every consumer group's live members and (with `lag`) its unconsumed records on the
    grown topics (grow.group_lag), and its committed offsets there."""
    tps = [TopicPartition(t, p) for t in grow.GROWN if t in counts for p in range(counts[t])]
    admin = await _admin(kafka)
    try:
        names = sorted(g[0] for g in await admin.list_consumer_groups())
        members = {g: await _members(admin, g) for g in names}
        offsets = {}
        for g in names:
            got = await admin.list_consumer_group_offsets(g, partitions=tps) if tps else {}
            offsets[g] = {TopicPartition(tp.topic, tp.partition): meta.offset
                          for tp, meta in got.items() if meta.offset >= 0}
    finally:
        await admin.close()
    starts, ends = await _offsets(kafka, tps) if lag else ({}, {})
    states = [grow.GroupState(g, members[g], grow.group_lag(offsets[g], starts, ends))
              for g in names]
    return states, offsets


class State:
    """The progress file: the target, and the rewritten topics' progress (the count each
    had when its records were saved, and those re-created and filled)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / STATE_FILE
        self.data: dict[str, Any] = json.loads(self.path.read_text()) if self.path.exists() else {}

    @property
    def started(self) -> bool:
        return bool(self.data)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        replace_file(self.path, json.dumps(self.data, sort_keys=True))

    def mark(self, what: str, topic: str, value: Any = True) -> None:
        self.data.setdefault(what, {})[topic] = value
        self.save()

    def has(self, what: str, topic: str) -> bool:
        return topic in self.data.get(what, {})

    def saved_records(self, topic: str) -> Path:
        """Where a rewritten topic's records wait while it is deleted and re-created."""
        return self.root / f"{topic}.records.jsonl"

    def done(self) -> None:
        self.path.unlink(missing_ok=True)
        for topic in grow.REWRITTEN:
            self.saved_records(topic).unlink(missing_ok=True)


async def grow_mesh(kafka: KafkaSettings, target: int, state_dir: Path, run_dir: Path, *,
                    dry_run: bool = False, say: Say = print) -> int:
    """The whole procedure; 0 when done (or, dry, when it would run), 1 when refused."""
    state = State(state_dir)
    if state.started and state.data.get("target") != target:
        msg = (f"a growth to {state.data.get('target')} is under way ({state.path}): run "
               f"it again with --grow {state.data.get('target')} to finish it")
        raise InvalidInput("growth_under_way", "grow", msg)
    counts = await topic_counts(kafka)
    for topic, n in state.data.get("saved", {}).items():
        counts.setdefault(topic, n)  # deleted, not yet re-created: its old count
    steps = grow.plan(counts, target)
    workers = running_workers(run_dir)
    # Resuming: the lag was checked before the first change; only liveness is checked now
    # (the re-home writes themselves are lag of the groups that consume chunks.v1).
    groups, offsets = await group_states(kafka, counts, lag=not state.started)
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
        state.data = {"target": target}
        state.save()
    for step in steps:
        if step.topic in grow.REWRITTEN:
            if step.grows or (state.has("saved", step.topic)
                              and not state.has("rewritten", step.topic)):
                await _rewrite(kafka, step, state, say)
        elif step.grows:
            await _add_partitions(kafka, step, say)
    for topic, rule in grow.REHOMED.items():
        await _rehome(kafka, topic, target, rule, say)
    await _skip_rehome(kafka, offsets, target, say)
    state.done()
    say(f"grown to {target} partitions; start the mesh with "
        f"STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS={target}")
    return 0


async def _add_partitions(kafka: KafkaSettings, step: grow.TopicStep, say: Say) -> None:
    """CreatePartitions: the new partitions are empty, the old ones keep every record at
    its offset, so every group's committed offsets stay valid."""
    admin = await _admin(kafka)
    try:
        await admin.create_partitions({step.topic: NewPartitions(step.target)})
        await _wait_count(admin, step.topic, step.target)
    finally:
        await admin.close()
    say(f"{step.topic}: {step.partitions} -> {step.target} partitions")


async def _wait_count(admin: AIOKafkaAdminClient, topic: str, want: int | None) -> None:
    """Until the broker's metadata shows `topic` with `want` partitions, each with a leader
    (None: until it is gone); it lags the controller by a moment."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        listed = topic in await admin.list_topics()
        have = (await _counts(admin, [topic], led=True)).get(topic) if listed else None
        if have == want:
            return
        if loop.time() > deadline:
            now = "gone" if not listed else f"{have} partitions (or leaders missing)"
            msg = f"{topic}: the broker still shows it {now} after {WAIT_S:.0f}s"
            raise InvalidInput("topic_not_ready", "topics", msg)
        await asyncio.sleep(0.2)


async def _rewrite(kafka: KafkaSettings, step: grow.TopicStep, state: State, say: Say) -> None:
    """Save each key's newest record, delete the topic, create it with the new count, write
    those records, each once on its new partition. A crash at any point is finished by a
    re-run: the saved records are the whole content until the topic is filled again."""
    routing = grow.REWRITTEN[step.topic]
    saved = state.saved_records(step.topic)
    if not state.has("saved", step.topic):
        records = _recs(await _read_all(kafka, step.topic, step.partitions))
        writes = grow.rewrite_writes(records, step.target, routing)
        state.root.mkdir(parents=True, exist_ok=True)
        replace_file(saved, "".join(grow.write_line(w) + "\n" for w in writes), durable=True)
        state.mark("saved", step.topic, step.partitions)
        say(f"{step.topic}: each key's newest record saved to {saved}: {len(writes)} key(s)")
    old = int(state.data["saved"][step.topic])
    if not saved.exists():
        msg = (f"{saved} is gone, and with it {step.topic}'s records while the topic is "
               f"re-created ({state.path} says they were saved)")
        raise InvalidInput("saved_records_missing", "grow", msg)
    writes = [grow.read_line(line) for line in saved.read_text().splitlines() if line]
    spec = next(s for s in grow.grown_specs() if s.name == step.topic)
    admin = await _admin(kafka)
    try:
        if step.topic in await admin.list_topics():  # the old one, or a cut-short re-creation
            await admin.delete_topics([step.topic])
            await _wait_count(admin, step.topic, None)
        await _create(admin, new_topic(replace(spec, count=step.target), kafka))
        await _wait_count(admin, step.topic, step.target)
    finally:
        await admin.close()
    await _produce(kafka, step.topic, writes)
    state.mark("rewritten", step.topic)
    moved = sum(w.partition != grow.partition_of(routing(w.key), old) for w in writes)
    say(f"{step.topic}: re-created with {step.target} partitions, each key's newest record "
        f"once on its partition: {len(writes)} key(s), {moved} moved")


async def _create(admin: AIOKafkaAdminClient, topic: NewTopic) -> None:
    """Create a topic just deleted: Kafka removes a deleted topic's logs asynchronously and
    may answer TopicAlreadyExists for a moment (aiokafka returns that code, it raises
    nothing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not await create_topics(admin, [topic]):
        if loop.time() > deadline:
            msg = f"{topic.name}: not created {WAIT_S:.0f}s after its delete"
            raise InvalidInput("topic_not_ready", "topics", msg)
        await asyncio.sleep(0.2)


async def _produce(kafka: KafkaSettings, topic: str, writes: list[grow.Write]) -> None:
    """`writes` in their order, each to its partition; returns once all are acknowledged."""
    if not writes:
        return
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5, acks="all",
                                enable_idempotence=kafka.producer_idempotence,
                                max_request_size=kafka.max_record_bytes, **kafka.client_options())
    await producer.start()
    try:
        futures = [await producer.send(topic, w.value, key=w.key, partition=w.partition,
                                       timestamp_ms=w.timestamp_ms or None,
                                       headers=list(w.headers)) for w in writes]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _read_all(kafka: KafkaSettings, topic: str, partitions: int) -> list[Any]:
    """Every record of the topic's partitions, up to their ends."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    starts, ends = await _offsets(kafka, tps)
    out: list[Any] = []
    todo = [tp for tp in tps if ends[tp] > starts[tp]]
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
    # Every copy on the broker before any retirement.
    await _produce(kafka, topic, [w for w in writes if w.kind == "copy"])
    await _produce(kafka, topic, [w for w in writes if w.kind == "retire"])
    copies = sum(w.kind == "copy" for w in writes)
    say(f"{topic}: {copies} key(s) re-homed, {len(writes) - copies} retired "
        f"({rule.retire})")


async def _skip_rehome(kafka: KafkaSettings, offsets: dict[str, Offsets], target: int,
                       say: Say) -> None:
    """Groups that consume chunks.v1 (they committed on it) start after the re-home writes:
    they applied every record before the growth, and the moved copies carry nothing new."""
    for topic in grow.SKIP_REHOME:
        ends = await _ends(kafka, [TopicPartition(topic, p) for p in range(target)])
        for group, committed in sorted(offsets.items()):
            if any(tp.topic == topic for tp in committed):
                await commit_offsets(kafka, group, ends)
                say(f"group {group}: committed past the re-home writes on {topic}")
