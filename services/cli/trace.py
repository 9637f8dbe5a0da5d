"""`streamrag trace DOC_ID`: one document's journey from docs.raw.v1 to searchable, one line
per hop, read from the records' own Kafka timestamps and fields: no tracing backend.

A hop's total is the difference of two Kafka timestamps (when each record was produced).
Waiting and working are split only where the records say when work started: ingest's
parse (`ingest_time`, set as parsing starts) and redaction's micro-batch (its `batch_id`
names the input offsets it took, so the batch could not start before its last one
arrived). Retrieval records no time: "searchable" is when this command's Retrieve call
first found the version, an upper bound. A change that stopped at redaction's, chunking's
or embedding's input, which each turn every record into an output or a dead letter, is
"lost" rather than in flight once the stage's consumer group has committed past it.
docs/design/observability.md says more.

`trails` and `journey` are the pure part: records as read in, hops out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.partitioner import murmur2

from services.cli.ready import Metadata, bearer
from services.cli.settings import MeshSettings
from shared.contract.codec import decode
from shared.contract.records import (
    ChunkSet,
    DeadLetter,
    Document,
    EmbeddedChunkSet,
    RedactedDocument,
)
from shared.contract.sealed import Forgotten, KeyUnavailable, open_chunks
from shared.contract.topics import (
    CHUNKS,
    CHUNKS_EMBEDDED,
    DEADLETTER,
    DEADLETTER_RAW,
    DOCS_NORMALIZED,
    DOCS_PARSED,
    DOCS_RAW,
    DOCS_REDACTED,
)
from shared.errors import InvalidInput
from shared.kafka.offsets import Committed, committed, groups_of, refused
from shared.keys.store import VersionKeys
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from shared.settings import KafkaSettings

KEYED = (DOCS_PARSED, DOCS_NORMALIZED, DOCS_REDACTED, CHUNKS, CHUNKS_EMBEDDED)
SEARCHABLE = "searchable"
KIND_HEADER = "streamrag-kind"  # ingest marks a table truncate on docs.parsed.v1 with it
NOTES = {  # by the topic a hop ends on: the stage that wrote it
    DOCS_NORMALIZED.name: "dedup and versioning (one record at a time): total only",
    DOCS_REDACTED.name: "redaction: total only",
    CHUNKS.name: "chunking (one record at a time): total only",
    CHUNKS_EMBEDDED.name: "embedding batches whatever is queued (no batch id kept): total only",
}
POLL_S = 0.25  # between Retrieve calls while waiting for a version to become searchable
# The stages that turn every input record into an output or a dead letter, by input topic,
# with their output topic: a commit past a record they left no trace of lost it. (Ingest is
# left out: dedup drops repeats silently, and trace ties raw records to parsed ones by time.)
STAGES = {DOCS_NORMALIZED.name: ("redaction", DOCS_REDACTED.name),
          DOCS_REDACTED.name: ("chunking", CHUNKS.name),
          CHUNKS.name: ("embedding", CHUNKS_EMBEDDED.name)}
COMPACTED = {t.name for t in KEYED if t.compacted}


@dataclass(frozen=True)
class Seen:
    """One record as read: where it sits, its Kafka timestamp (ms), its headers and bytes."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()
    value: bytes | None = None
    key: bytes | None = None


@dataclass
class Trail:
    """The records one change of the document left, in pipeline order, and how it ended."""

    stops: list[tuple[Seen, Any]] = field(default_factory=list)  # (record, decoded or None)
    dead: tuple[Seen, DeadLetter] | None = None
    dropped: bool = False  # dedup passed nothing on: a repeat of the version it holds

    @property
    def doc(self) -> Any:
        """The newest decoded record (a Document, ChunkSet, ...), None for a raw record only."""
        return next((d for _, d in reversed(self.stops) if d is not None), None)

    @property
    def version(self) -> int | None:
        topics = {s.topic for s, _ in self.stops}
        return self.doc.version if DOCS_NORMALIZED.name in topics else None


@dataclass(frozen=True)
class Searchable:
    """What Retrieve showed: first served at `at_ms` (UTC ms); `missed_ms`: the last call
    before that which did not serve it, None when the first call already did."""

    at_ms: int
    missed_ms: int | None = None

    def note(self) -> str:
        if self.missed_ms is None:
            return (f"already served when first asked ({_clock(self.at_ms)}): an upper bound, "
                    "retrieval keeps no time")
        return (f"became searchable between {_clock(self.missed_ms)} and {_clock(self.at_ms)}"
                f" (Retrieve every {POLL_S:g} s)")


@dataclass(frozen=True)
class Hop:
    hop: int
    source: str
    target: str
    at_ms: int  # when the record reached `target` (its Kafka timestamp), UTC ms
    total_ms: int
    waiting_ms: int | None
    working_ms: int | None
    note: str
    upper_bound: bool = False  # the total is at most this (the record kept no time)


@dataclass(frozen=True)
class CommittedPast:
    """A stage's group committed past the record a change stopped at, with no output."""

    stage: str
    group: str
    topic: str
    partition: int
    offset: int  # the record's
    committed: int  # the group's committed offset: the next record it would read

    def describe(self) -> str:
        return (f"committed past at {self.stage}: group {self.group} committed "
                f"{self.topic}/{self.partition} to {self.committed}, past its record "
                f"{self.topic}/{self.partition}@{self.offset}, with no output and no dead letter")


@dataclass(frozen=True)
class Journey:
    version: int | None
    op: str
    end: str  # searchable, removed, superseded, dead_letter, dropped, in_flight, lost
    reached: str  # the last topic it reached (or "searchable")
    hops: tuple[Hop, ...]
    reason: str = ""
    lost: CommittedPast | None = None  # end "lost": which commit passed it

    @property
    def end_to_end_ms(self) -> int:
        return sum(h.total_ms for h in self.hops)


def partition_of(doc_id: str, partitions: int = 0) -> int:
    """The partition a doc id keys to on every keyed topic (all in the documents group, so
    of one count, by default this process's): the producers' default partitioner (murmur2)."""
    return (murmur2(doc_id.encode()) & 0x7FFFFFFF) % (partitions or DOCS_PARSED.partitions)


def mentions(value: bytes | None, doc_id: str) -> bool:
    """Whether a raw payload names the doc id: a plain document's `id`, or a CDC row's key
    and table (`db.table/key`). A cheap byte test first, then a JSON walk for an exact
    value, so text that merely contains the id does not count."""
    space, _, key = doc_id.rpartition("/")
    if not value or key.encode() not in value or space.rpartition(".")[2].encode() not in value:
        return False
    try:
        obj = json.loads(value)
    except ValueError:
        return False
    wanted = {doc_id, key}
    return any(str(v) in wanted for v in _scalars(obj) if isinstance(v, str | int))


def _scalars(obj: Any) -> Iterable[Any]:
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _scalars(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _scalars(v)
    else:
        yield obj


def _decoded(records: Iterable[Seen], topic: str, cls: type, doc_id: str) -> list[tuple[Seen, Any]]:
    out = []
    for r in records:
        if r.topic != topic or dict(r.headers).get(KIND_HEADER):
            continue
        try:
            rec: Any = decode(cls, r.value)
        except InvalidInput:
            continue
        if rec.doc_id == doc_id:
            out.append((r, rec))
    return sorted(out, key=lambda sr: (sr[0].partition, sr[0].offset))


def _dead_letters(records: Iterable[Seen]) -> dict[tuple[str, int, int], tuple[Seen, DeadLetter]]:
    out = {}
    for r in records:
        if r.topic in (DEADLETTER.name, DEADLETTER_RAW.name):
            try:
                dl = decode(DeadLetter, r.value)
            except InvalidInput:
                continue
            out[(dl.source_topic, dl.partition, dl.offset)] = (r, dl)
    return out


def trails(doc_id: str, records: Sequence[Seen]) -> list[Trail]:
    """Every change of the document, oldest first: raw record, parsed, normalized, redacted,
    chunked, embedded, as far as each got, and its dead letter if it ended in one."""
    dead = _dead_letters(records)
    raw = sorted((r for r in records if r.topic == DOCS_RAW.name
                  and (r.key == doc_id.encode() or mentions(r.value, doc_id))),
                 key=lambda r: (r.timestamp, r.partition, r.offset))
    later = {t.name: _decoded(records, t.name, cls, doc_id) for t, cls in (
        (DOCS_NORMALIZED, Document), (DOCS_REDACTED, RedactedDocument), (CHUNKS, ChunkSet))}
    embedded = [(r, d) for r, d in _decoded(records, CHUNKS_EMBEDDED.name, EmbeddedChunkSet,
                                             doc_id) if r.key == doc_id.encode()]
    out = []
    for parsed in _decoded(records, DOCS_PARSED.name, Document, doc_id):
        trail = Trail()
        start = next((r for r in raw if r.timestamp <= parsed[1].ingest_time * 1000 + 1), None)
        if start is not None:
            raw.remove(start)
            trail.stops.append((start, None))
        trail.stops.append(parsed)
        _follow(trail, later, embedded, dead)
        out.append(trail)
    for r in raw:  # never parsed: dead-lettered by ingest, or still waiting for it
        if (r.topic, r.partition, r.offset) in dead or r.key == doc_id.encode():
            out.append(Trail([(r, None)], dead.get((r.topic, r.partition, r.offset))))
    return sorted(out, key=lambda t: t.stops[0][0].timestamp)


def _follow(trail: Trail, later: dict[str, list[tuple[Seen, Any]]],
            embedded: list[tuple[Seen, Any]],
            dead: dict[tuple[str, int, int], tuple[Seen, DeadLetter]]) -> None:
    """Extend a trail from its parsed record as far as the document's records go."""
    parsed = trail.doc
    normalized = next(((r, d) for r, d in later[DOCS_NORMALIZED.name]
                       if d.ingest_time == parsed.ingest_time
                       and d.content_hash == parsed.content_hash), None)
    steps = [normalized]
    if normalized is not None:
        version = normalized[1].version
        for topic in (DOCS_REDACTED.name, CHUNKS.name):
            steps.append(next(((r, d) for r, d in later[topic] if d.version == version), None))
        steps.append(next(((r, d) for r, d in embedded if d.version == version), None))
    for step in steps:
        last = trail.stops[-1][0]
        if step is None or (last.topic, last.partition, last.offset) in dead:
            break
        trail.stops.append(step)
    last = trail.stops[-1][0]
    trail.dead = dead.get((last.topic, last.partition, last.offset))
    # Nothing passed on and nothing dead-lettered: a repeat when the version dedup held
    # then has this content; otherwise dedup has not got to it yet.
    before = [d for r, d in later[DOCS_NORMALIZED.name] if d.ingest_time < parsed.ingest_time]
    trail.dropped = (normalized is None and trail.dead is None and bool(before)
                     and before[-1].content_hash == parsed.content_hash)


def journey(trail: Trail, normalized: Sequence[Seen], searchable: Searchable | None = None,
            superseded: bool = False, past: CommittedPast | None = None) -> Journey:
    """The hops of one trail. `normalized`: records of docs.normalized.v1 (timestamps of a
    redaction batch's members); `searchable`: when retrieval was seen to serve it; `past`:
    the commit that passed the record it stopped at (it is lost unless it ended otherwise)."""
    hops: list[Hop] = []
    for (a, _), (b, db) in zip(trail.stops, trail.stops[1:], strict=False):
        waiting, note = _split(a, b, db, normalized)
        total = b.timestamp - a.timestamp
        hops.append(Hop(len(hops) + 1, a.topic, b.topic, b.timestamp, total, waiting,
                        None if waiting is None else total - waiting, note))
    last = trail.stops[-1][0]
    doc = trail.doc
    op = doc.op if doc is not None else "?"
    end, reached, reason = "in_flight", last.topic, ""
    if trail.dead is not None:
        r, dl = trail.dead
        reason = f"{dl.stage}: {dl.reason}" + (f" ({dl.field})" if dl.field else "")
        hops.append(Hop(len(hops) + 1, last.topic, r.topic, r.timestamp, r.timestamp
                        - last.timestamp, None, None, f"dead-lettered by {reason}"))
        end, reached = "dead_letter", r.topic
    elif trail.dropped:
        end, reason = "dropped", "dedup passed nothing on: a repeat of the version it holds"
    elif last.topic == CHUNKS_EMBEDDED.name and superseded:
        end, reason = "superseded", "a newer version replaced it in the index"
    elif last.topic == CHUNKS_EMBEDDED.name and searchable is not None:
        end = reached = "removed" if op == "delete" else SEARCHABLE
        hops.append(Hop(len(hops) + 1, last.topic, SEARCHABLE, searchable.at_ms,
                        searchable.at_ms - last.timestamp, None, None, searchable.note(),
                        upper_bound=searchable.missed_ms is None))
    elif past is not None:
        end, reason = "lost", past.describe()
    return Journey(trail.version, op, end, reached, tuple(hops), reason,
                   past if end == "lost" else None)


def committed_past(trail: Trail, commits: Mapping[tuple[str, int], Committed],
                   newest: Mapping[str, int]) -> CommittedPast | None:
    """The commit past the record `trail` stopped at, when that record is a stage's input
    the stage left nothing for. `commits`: (topic, partition) -> the furthest commit of the
    stage's groups; `newest`: per output topic, the document's newest version on it (on a
    compacted topic a newer version may have replaced the output: not a loss)."""
    last = trail.stops[-1][0]
    if trail.dead is not None or trail.dropped or last.topic not in STAGES:
        return None
    stage, output = STAGES[last.topic]
    commit = commits.get((last.topic, last.partition))
    if commit is None or commit.offset <= last.offset:
        return None
    if output in COMPACTED and newest.get(output, 0) > (trail.version or 0):
        return None
    return CommittedPast(stage, commit.group, last.topic, last.partition, last.offset,
                         commit.offset)


def _newest(doc_id: str, records: Sequence[Seen]) -> dict[str, int]:
    """The document's newest version on each compacted output topic."""
    out = {}
    for topic, cls in ((CHUNKS.name, ChunkSet), (CHUNKS_EMBEDDED.name, EmbeddedChunkSet)):
        versions = [d.version for r, d in _decoded(records, topic, cls, doc_id)
                    if topic != CHUNKS_EMBEDDED.name or r.key == doc_id.encode()]
        if versions:
            out[topic] = max(versions)
    return out


def _split(a: Seen, b: Seen, doc: Any, normalized: Sequence[Seen]) -> tuple[int | None, str]:
    """(waiting ms or None, note) of the hop a -> b, from what the output record says."""
    if a.topic == DOCS_RAW.name:
        return (round(doc.ingest_time * 1000) - a.timestamp,
                "waiting: until ingest_time (parse start); working: parse and send")
    if b.topic == DOCS_REDACTED.name and doc.batch_id:
        first, _, last = doc.batch_id.rsplit("/", 1)[1].partition("-")
        closer = next((r for r in normalized if r.partition == a.partition
                       and r.offset == int(last)), None)
        size = int(last) - int(first) + 1
        if closer is not None:
            return (max(0, closer.timestamp - a.timestamp),
                    f"micro-batch of {size} (offsets {first}-{last}): waiting: until its last "
                    "record arrived; working: the rest, batch window included")
        return None, f"micro-batch of {size} (offsets {first}-{last}): total only"
    return None, NOTES.get(b.topic, "total only")


def journeys(doc_id: str, records: Sequence[Seen], searchable: Searchable | None = None,
             commits: Mapping[tuple[str, int], Committed] | None = None) -> list[Journey]:
    """Every change's journey, oldest first; only the newest version can be searchable.
    `commits`: the stages' committed offsets, read before `records` (a commit read after
    them may have passed outputs they do not hold)."""
    found = trails(doc_id, records)
    normalized = [r for r in records if r.topic == DOCS_NORMALIZED.name]
    newest = max((t.version for t in found if t.version is not None), default=None)
    outputs = _newest(doc_id, records) if commits else {}
    return [journey(t, normalized, searchable if t.version == newest else None,
                    superseded=t.version is not None and t.version != newest,
                    past=committed_past(t, commits, outputs) if commits else None)
            for t in found]


def verdict(found: Sequence[Journey]) -> Journey | None:
    """The journey that decides the exit code: the newest change that was not a repeat."""
    kept = [j for j in found if j.end != "dropped"] or list(found)
    return kept[-1] if kept else None


def render(doc_id: str, found: Sequence[Journey]) -> str:
    lines = []
    for j in found:
        name = f"v{j.version}" if j.version is not None else "(no version)"
        why = f": {j.reason}" if j.reason else ""
        at_most = "at most " if any(h.upper_bound for h in j.hops) else ""
        how = (f"{at_most}{j.end_to_end_ms} ms end to end" if j.end in (SEARCHABLE, "removed")
               else f"reached {j.reached} after {j.end_to_end_ms} ms")
        lines.append(f"{doc_id} {name} ({j.op}): lost: {j.reason}; {how}" if j.end == "lost"
                     else f"{doc_id} {name} ({j.op}): {j.end.replace('_', ' ')}, {how}{why}")
        lines.append(f"{'hop':>3}  {'from -> to':<42} {'at (UTC)':<12} {'total ms':>8} "
                     f"{'waiting':>8} {'working':>8}  note")
        for h in j.hops:
            lines.append(f"{h.hop:>3}  {h.source + ' -> ' + h.target:<42} {_clock(h.at_ms):<12} "
                         f"{h.total_ms:>8} {_ms(h.waiting_ms):>8} {_ms(h.working_ms):>8}  "
                         f"{h.note}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:12]


def _ms(value: int | None) -> str:
    return "-" if value is None else str(value)


def as_json(doc_id: str, found: Sequence[Journey]) -> dict[str, Any]:
    return {"doc_id": doc_id, "journeys": [
        {**asdict(j), "end_to_end_ms": j.end_to_end_ms} for j in found]}


# Reading the broker and asking retrieval.


def _wanted(r: Any, doc_id: str) -> Seen | None:
    """The record as a Seen when it may belong to the trace (else None); the rest of
    docs.normalized.v1 keeps its timestamp only (redaction batches)."""
    key = doc_id.encode()
    seen = Seen(r.topic, r.partition, r.offset, r.timestamp, tuple(r.headers or ()),
                r.value, r.key)
    if r.topic in (DEADLETTER.name, DEADLETTER_RAW.name) or r.key == key:
        return seen
    if r.topic == DOCS_RAW.name:
        return seen if mentions(r.value, doc_id) else None
    if r.topic == DOCS_NORMALIZED.name:
        return Seen(r.topic, r.partition, r.offset, r.timestamp)
    return None


async def read(kafka: KafkaSettings, doc_id: str, timeout_s: float) -> tuple[list[Seen], bool]:
    """The document's records: its partition of each keyed topic, every raw partition (the
    raw key is optional) and the dead letters, up to the end offsets read first (records
    produced meanwhile are not waited for: a live mesh's topics still have an end). True
    when reading ran into the timeout."""
    here = partition_of(doc_id)
    tps = [TopicPartition(t.name, here) for t in KEYED]
    tps += [TopicPartition(DOCS_RAW.name, p) for p in range(DOCS_RAW.partitions)]
    tps += [TopicPartition(t.name, 0) for t in (DEADLETTER_RAW, DEADLETTER)]
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=10,
                                **kafka.client_options())
    await consumer.start()
    out: list[Seen] = []
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        ends = await consumer.end_offsets(tps)
        behind = [tp for tp in tps if await consumer.position(tp) < ends[tp]]
        while behind:
            if time.monotonic() > deadline:
                return out, True
            for tp, records in (await consumer.getmany(*behind, timeout_ms=200)).items():
                out += [s for r in records
                        if r.offset < ends[tp] and (s := _wanted(r, doc_id)) is not None]
            behind = [tp for tp in behind if await consumer.position(tp) < ends[tp]]
    finally:
        await consumer.stop()
    return out, False


def _opened(chunk_set: ChunkSet | EmbeddedChunkSet) -> ChunkSet | EmbeddedChunkSet:
    """The set in clear with this machine's data keys (STREAMRAG_KEYS_*); as it is when it
    is not sealed or its key is gone (then no chunk text asks the question)."""
    if not chunk_set.sealed:
        return chunk_set
    try:
        keys = VersionKeys.from_settings()
        return (open_chunks(chunk_set, keys) if isinstance(chunk_set, EmbeddedChunkSet)
                else open_chunks(chunk_set, keys))
    except (Forgotten, KeyUnavailable, OSError, sqlite3.Error):
        return chunk_set


def seen_in_search(target: str, doc_id: str, newest: Trail, until: float,
                   metadata: Metadata = ()) -> Searchable | None:
    """When Retrieve (filtered to the document's source, asked with its own first chunk)
    first served the newest version (for a delete: first no longer served the document),
    None if not before `until` (monotonic)."""
    doc = newest.doc
    text = next((c.text for _, d in newest.stops if isinstance(d, ChunkSet | EmbeddedChunkSet)
                 for c in _opened(d).chunks[:1] if c.text), doc.title or doc_id)
    request = inference_pb2.RetrieveRequest(question=text[:300], top_k=50, source=doc.source)
    missed = None
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        while True:
            try:
                hits = [c for c in stub.Retrieve(request, timeout=5, metadata=metadata).chunks
                        if c.doc_id == doc_id]
                now = round(time.time() * 1000)
                if (not hits) if doc.op == "delete" else any(c.version >= doc.version
                                                             for c in hits):
                    return Searchable(now, missed)
                missed = now
            except grpc.RpcError:
                pass  # warming up or down: try again until the timeout
            if time.monotonic() > until:
                return None
            time.sleep(POLL_S)


def _arrived(found: list[Trail], commits: Mapping[tuple[str, int], Committed],
             newest: Mapping[str, int]) -> bool:
    """Whether the newest change has got as far as it can on the topics (or was lost)."""
    if not found:
        return False
    last = found[-1]
    return last.dead is not None or last.dropped or \
        last.stops[-1][0].topic == CHUNKS_EMBEDDED.name or \
        committed_past(last, commits, newest) is not None


async def stage_commits(kafka: KafkaSettings, doc_id: str,
                        ) -> dict[tuple[str, int], Committed]:
    """The stages' furthest commits on the document's partition of their input topics
    (none where the broker refuses this principal their groups: nothing is called lost)."""
    here = partition_of(doc_id)
    tps = [TopicPartition(topic, here) for topic in STAGES]
    groups = tuple(dict.fromkeys(g for stage, _ in STAGES.values() for g in groups_of(stage)))
    try:
        found = await committed(kafka, groups, tps)
    except KafkaError as exc:
        if not refused(exc):
            raise
        return {}
    return {(tp.topic, tp.partition): c for tp, c in found.items()}


async def read_trails(kafka: KafkaSettings, doc_id: str, until: float, wait: bool,
                      ) -> tuple[list[Seen], list[Trail], dict[tuple[str, int], Committed], bool]:
    """Read the document's records (again and again with `wait`, until its newest change
    has arrived or `until` passes): the records, their trails, the stages' commits read
    just before them, whether time ran out."""
    while True:
        # The commits first: a commit read after the records may have passed outputs that
        # arrived after the records were read, and would call a change lost that is not.
        commits = await stage_commits(kafka, doc_id)
        records, cut = await read(kafka, doc_id, max(0.1, until - time.monotonic()))
        found = trails(doc_id, records)
        arrived = _arrived(found, commits, _newest(doc_id, records))
        if not wait or cut or arrived or time.monotonic() > until:
            return records, found, commits, cut or (wait and not arrived)
        await asyncio.sleep(POLL_S)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="a document's journey from docs.raw.v1 to searchable")
    p.add_argument("doc_id", metavar="DOC_ID", help="the document id (CDC: db.table/key)")
    p.add_argument("--version", type=int, default=None, metavar="N",
                   help="only version N (default: every change of the document)")
    p.add_argument("--timeout", type=float, default=15.0, metavar="S",
                   help="give up reading the topics and asking retrieval after S seconds "
                        "(default %(default)s)")
    p.add_argument("--wait", action="store_true",
                   help="a document still on its way: follow it until it is searchable "
                        "(or dead-lettered, or lost, or --timeout)")
    p.add_argument("--target", default=None, help="inference gRPC address (default: the mesh's)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of tables")


def run(args: argparse.Namespace) -> int:
    if not args.doc_id.strip() or args.timeout <= 0 or (args.version or 1) < 1:
        print("trace: DOC_ID must not be blank, --timeout and --version must be positive")
        return 2
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    kafka = KafkaSettings()
    until = time.monotonic() + args.timeout
    try:
        records, found, commits, cut = asyncio.run(read_trails(kafka, args.doc_id, until,
                                                               args.wait))
    except KafkaConnectionError:
        print(f"broker not reachable at {kafka.bootstrap}: is the mesh up (scripts/up)?")
        return 1
    versioned = [t for t in found if t.version is not None]
    searchable = None
    if versioned and versioned[-1].stops[-1][0].topic == CHUNKS_EMBEDDED.name:
        mesh = MeshSettings()
        target = args.target or mesh.inference_target
        at_least = time.monotonic() + 2.0  # one look at retrieval even when reading was slow
        token = mesh.inference_token.get_secret_value() if mesh.inference_token else None
        searchable = seen_in_search(target, args.doc_id, versioned[-1], max(until, at_least),
                                    bearer(token))
    shown = journeys(args.doc_id, records, searchable, commits)
    if args.version is not None:
        shown = [j for j in shown if j.version == args.version]
    last = verdict(shown)
    code = 0 if last is not None and last.end in (SEARCHABLE, "removed") else 1
    if args.json:
        print(json.dumps({**as_json(args.doc_id, shown), "timed_out": cut, "exit": code},
                         sort_keys=True))
        return code
    if last is None:
        what = f"version {args.version} of " if args.version is not None else ""
        print(f"no record of {what}{args.doc_id} on {DOCS_RAW.name} .. {CHUNKS_EMBEDDED.name}")
    else:
        print(render(args.doc_id, shown))
    if cut:
        print(f"(stopped at --timeout {args.timeout:g} s: the trail may be incomplete)")
    return code
