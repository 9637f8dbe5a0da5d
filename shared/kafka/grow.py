"""Growing the document topics' partitions: which topics grow together, whether the mesh is
quiet enough, and how each key's newest record is moved to its new partition. Pure, no
Kafka: services/cli/topics.py drives the broker (docs/design/growing-partitions.md).

Every record that carries a document is keyed by its id and sent by the producer's default
partitioner, murmur2(key) mod the partition count, so all versions of a document share a
partition. Adding partitions (Kafka's CreatePartitions) changes that mapping for most keys:
the next version of a document would land on another partition than its older versions and
its per-document state. Old partitions keep their records and offsets; what per-document
state later readers rebuild from a compacted log (ingest's `doc_versions` changelog,
chunks.v1, chunks.embedded.v1, the subject index pii.subjects.v1) is re-homed: each key's
newest record is copied to the partition the partitioner now picks, then retired where it
was (a tombstone, or a contract delete where the reader applies deletes and would drop a
tombstone as bad input); the changelog is rewritten instead (REWRITTEN).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from aiokafka.partitioner import murmur2

from shared.contract.codec import decode, encode
from shared.contract.records import EmbeddedChunkSet
from shared.contract.topics import (
    CHUNKS,
    CHUNKS_EMBEDDED,
    DOC_VERSIONS,
    PII_SUBJECTS,
    TopicSpec,
    all_topic_specs,
)
from shared.errors import InvalidInput

Retire = Literal["tombstone", "delete"]

# The topics that grow together: the contract's `documents` group (STREAMRAG_KAFKA_
# PARTITIONS_DOCUMENTS): every topic keyed by document id, search.requests.v1 (which must
# match chunks.embedded.v1: one scatter request per shard), and the changelogs of the
# tables on docs.parsed.v1 (Faust refuses a changelog whose count differs from its source's).
# source_clocks is keyed "source@partition": its records stay where they are.
GROWN: tuple[str, ...] = tuple(s.name for s in all_topic_specs() if s.group == "documents")


def same_key(key: bytes) -> bytes:
    return key


def table_key(key: bytes) -> bytes:
    """The source record's key of a Faust table's changelog key: Faust writes a str table
    key as JSON (`"doc-1"`) to the partition of the event that wrote it, which the producer
    picked from the raw doc id."""
    try:
        decoded = json.loads(key)
    except ValueError:
        return key
    return decoded.encode() if isinstance(decoded, str) else key


@dataclass(frozen=True)
class Rehomed:
    """A compacted log whose keys are moved: how a moved key is retired on its old
    partition, and the key its partition is picked by."""

    retire: Retire
    routing_key: Callable[[bytes], bytes] = same_key


# Compacted logs that later readers rebuild per-document state from, whose offsets others
# rely on (group offsets, retrieval's snapshots): moved in place. chunks.embedded.v1:
# retrieval rebuilds the old shard from it and applies a delete (a tombstone would be
# dead-lettered, leaving the document in two shards). chunks.v1: a tombstone, so compaction
# removes the old copy for the next model's embedding group; the running groups are moved
# past the re-home writes (nothing new in them).
# pii.subjects.v1: a tombstone (its reader skips them), so one document's index record is
# on one partition only, and forgetting it later means one tombstone where it now lives.
REHOMED: dict[str, Rehomed] = {
    CHUNKS_EMBEDDED.name: Rehomed("delete"), CHUNKS.name: Rehomed("tombstone"),
    PII_SUBJECTS.name: Rehomed("tombstone"),
}
# Table changelogs keyed by doc id: rewritten, not moved in place. Faust's memory store keeps
# one dict for all the partitions a worker holds and recovers them in no set order, so a
# tombstone on the old partition could delete the moved state, and an old copy left there
# could overwrite a newer one: each key must be on one partition only. Kafka refuses
# DeleteRecords on a compacted topic, and nothing relies on a changelog's offsets (a memory
# store recovers from the start), so the topic is re-created holding each key's newest
# record once, on its new partition, and nothing on the old one.
REWRITTEN: dict[str, Callable[[bytes], bytes]] = {DOC_VERSIONS.changelog: table_key}
# Groups consuming these topics are committed past the re-home writes: they have applied
# every record already (lag 0), and would otherwise embed the moved copies again.
SKIP_REHOME = (CHUNKS.name,)


def partition_of(key: bytes, partitions: int) -> int:
    """The partition the producers' default partitioner (aiokafka's, Faust's) picks."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def grown_specs() -> tuple[TopicSpec, ...]:
    """The contract's specs of the grown topics (changelogs included), for re-creating a
    rewritten one."""
    return tuple(s for s in all_topic_specs() if s.name in GROWN)


@dataclass(frozen=True)
class TopicStep:
    topic: str
    partitions: int  # what the broker has now
    target: int

    @property
    def grows(self) -> bool:
        return self.partitions < self.target


def plan(counts: Mapping[str, int], target: int) -> list[TopicStep]:
    """One step per grown topic; InvalidInput when the target would shrink one or a topic
    is missing (run `streamrag topics` first)."""
    missing = [t for t in GROWN if t not in counts]
    if missing:
        raise InvalidInput("missing_topics", "topics", ", ".join(missing))
    shrink = [f"{t} has {counts[t]}" for t in GROWN if counts[t] > target]
    if shrink:
        msg = f"partitions can only be added, not removed: {'; '.join(shrink)}"
        raise InvalidInput("cannot_shrink", "partitions", msg)
    return [TopicStep(t, counts[t], target) for t in GROWN]


@dataclass(frozen=True)
class GroupState:
    group: str
    members: int | None  # None: the broker cannot say
    lag: Mapping[str, int]  # topic -> records not yet committed


def group_lag(committed: Mapping[tuple[str, int], int], starts: Mapping[tuple[str, int], int],
              ends: Mapping[tuple[str, int], int]) -> dict[str, int]:
    """A group's records not yet consumed, per topic (the offsets are keyed by (topic,
    partition)): on every topic the group has committed a partition of (so it consumes that
    topic), each partition's end minus what it committed there, or minus the log start
    where it committed nothing (its consumer would start there: Faust's offset reset is
    `earliest`)."""
    topics = {t for t, _ in committed}
    out: dict[str, int] = {}
    for (topic, p), end in ends.items():
        if topic in topics:
            start = starts.get((topic, p), 0)
            at = max(committed.get((topic, p), start), start)
            out[topic] = out.get(topic, 0) + max(0, end - at)
    return out


def quiet_problems(groups: Iterable[GroupState], workers: Iterable[str] = ()) -> list[str]:
    """Why the mesh is not quiet enough to grow: a worker process of this machine's mesh
    still running, a live group member, or records not consumed."""
    out = [f"worker {w} is running: stop the mesh" for w in workers]
    for g in groups:
        if g.members is None:
            out.append(f"group {g.group}: the broker cannot say whether it has members")
        elif g.members:
            out.append(f"group {g.group} has {g.members} live member(s): stop the mesh (a "
                       "stopped worker counts until its session times out)")
        out += [f"group {g.group} has {n} unconsumed record(s) on {t}: let it drain"
                for t, n in sorted(g.lag.items()) if n]
    return out


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes
    value: bytes | None
    timestamp_ms: int = 0
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class Write:
    partition: int
    key: bytes
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...]
    kind: Literal["copy", "retire"]


def write_line(w: Write) -> str:
    """`w` as one JSON line (bytes in base64): how a rewrite is kept on disk while its topic
    is deleted and re-created."""
    return json.dumps({"p": w.partition, "k": _b64(w.key), "v": _b64(w.value),
                       "t": w.timestamp_ms, "h": [[n, _b64(v)] for n, v in w.headers],
                       "kind": w.kind}, sort_keys=True)


def read_line(line: str) -> Write:
    """The Write that write_line wrote."""
    d = json.loads(line)
    return Write(int(d["p"]), _unb64(d["k"]) or b"", _unb64(d["v"]), int(d["t"]),
                 tuple((str(n), _unb64(v) or b"") for n, v in d["h"]), d["kind"])


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


def retired(rec: Rec, how: Retire) -> bool:
    """Whether a key's newest record on a partition holds nothing to move: a tombstone, or
    (for the contract's chunk sets) a delete."""
    if rec.value is None:
        return True
    if how == "tombstone":
        return False
    try:
        return decode(EmbeddedChunkSet, rec.value).op == "delete"
    except InvalidInput:
        return False


def retirement(rec: Rec, how: Retire) -> bytes | None:
    """What retires `rec` on its old partition: None (a tombstone) or the same version as a
    delete with no chunks, which a shard applies by dropping the document."""
    if how == "tombstone" or rec.value is None:
        return None
    try:
        update = decode(EmbeddedChunkSet, rec.value)
    except InvalidInput:
        return None  # not a chunk set: nothing reads it as one
    return encode(update.model_copy(update={"op": "delete", "chunks": (), "title": "",
                                            "key_id": "", "sealed": ""}))


def rehome_writes(records: Iterable[Rec], partitions: int, how: Retire,
                  routing_key: Callable[[bytes], bytes] = same_key) -> list[Write]:
    """The writes that leave each key's newest live record on
    partition_of(routing_key(key), partitions) and nowhere else: copies first (in key
    order), then retirements, so a crash between the two leaves the copy in place and a
    re-run only retires. Applied, they make a re-run return nothing (idempotent).

    The copy is the key's newest record on the partitions it strayed on; if the target
    already holds a live record of the key, that one is newer (written after the growth,
    or a copy of an earlier run) and is kept.
    """
    newest = newest_by_key(records)
    copies: list[Write] = []
    retires: list[Write] = []
    for key in sorted(newest):
        at = newest[key]
        target = partition_of(routing_key(key), partitions)
        stray = [r for p, r in sorted(at.items()) if p != target and not retired(r, how)]
        if not stray:
            continue
        here = at.get(target)
        if here is None or retired(here, how):
            src = max(stray, key=lambda r: (r.timestamp_ms, r.partition))
            copies.append(Write(target, key, src.value, src.timestamp_ms, src.headers, "copy"))
        retires += [Write(r.partition, key, retirement(r, how), r.timestamp_ms, (), "retire")
                    for r in stray]
    return copies + retires


def rewrite_writes(records: Iterable[Rec], partitions: int,
                   routing_key: Callable[[bytes], bytes] = same_key) -> list[Write]:
    """A compacted log's content re-homed from scratch: each key's newest record (a key on
    several partitions: the latest by timestamp) once, on its partition; a key whose newest
    record is a tombstone is left out."""
    out = []
    for key, at in sorted(newest_by_key(records).items()):
        rec = max(at.values(), key=lambda r: (r.timestamp_ms, r.partition))
        if rec.value is not None:
            out.append(Write(partition_of(routing_key(key), partitions), key, rec.value,
                             rec.timestamp_ms, rec.headers, "copy"))
    return out


def apply_writes(records: list[Rec], writes: Iterable[Write]) -> list[Rec]:
    """`records` with `writes` appended at the end of their partitions (what the broker does
    with them); for tests and the dry run's counts."""
    ends: dict[int, int] = {}
    for r in records:
        ends[r.partition] = max(ends.get(r.partition, -1), r.offset)
    out = list(records)
    for w in writes:
        ends[w.partition] = ends.get(w.partition, -1) + 1
        out.append(Rec(w.partition, ends[w.partition], w.key, w.value, w.timestamp_ms, w.headers))
    return out


def newest_by_key(records: Iterable[Rec]) -> dict[bytes, dict[int, Rec]]:
    """Each key's newest record on each partition it has records on."""
    newest: dict[bytes, dict[int, Rec]] = {}
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        newest.setdefault(rec.key, {})[rec.partition] = rec
    return newest
