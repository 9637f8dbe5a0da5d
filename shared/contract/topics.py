"""The topic contract: every topic and table of the mesh, declared once.

Topics are created explicitly at bring-up with these partition counts: a topic
auto-created by a producer would get the broker's default count, and Faust
refuses a table changelog whose count differs from its source topic.
Everything that carries a document is keyed by document id, so all versions of
a document stay on one partition, in order.

Partition counts are a deployment setting per topic group (contract.partitions.PartitionSettings,
STREAMRAG_KAFKA_PARTITIONS_<GROUP>, read once, when a count is first asked for): each TopicSpec
names its group, each table follows its source topic. The `documents` group holds the whole
document path and the search topics, because search.requests.v1 must stay co-partitioned with
chunks.embedded.v1 (request partition p reaches the owner of shard p); `single` topics always
have one partition. Existing topics are checked against the counts at bring-up
(shared/kafka/admin.py); nothing is ever repartitioned silently.

What an audit proof needs (the redacted versions, the audit records and the anchor
announcements) is marked `evidence`: those topics are kept for the audit retention
(shared/contract/retention.py, default forever), never for an operational default.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field, replace
from typing import Literal

from shared.contract.partitions import PartitionSettings
from shared.contract.sizes import MAX_RECORD_BYTES
from shared.encoder.model import MODEL_ID
from shared.errors import ConfigError

# documents: docs.*, chunks.*, search requests (what `streamrag topics --grow` grows);
# audit: audit.*; telemetry: search replies, feedback, latency, stats, drift; single: one
# partition whatever the settings (one reader must see every record).
PartitionGroup = Literal["documents", "audit", "telemetry", "single"]
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
WEEK_MS = 7 * DAY_MS
FOREVER = -1  # retention.ms / retention.bytes: never deleted by age or size


@functools.cache
def layout() -> PartitionSettings:
    """This process's counts, read from the environment on first use (never at import):
    every service, CLI and script of one mesh reads the same env."""
    return PartitionSettings()


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: str
    value: str
    group: PartitionGroup = "documents"
    # 0: the group's count in this process's layout() (resized() sets another layout's).
    count: int = 0
    compacted: bool = False
    retention_ms: int = WEEK_MS
    doc: str = ""
    config: dict[str, str] = field(default_factory=dict)
    # Holds what an audit proof needs: its retention is the audit retention, by time only
    # (retention.bytes unlimited, whatever the broker's default), and bring-up checks it.
    evidence: bool = False
    # Carries document text (raw or redacted, whole or chunked): reached by the text
    # retention (with_audit_retention), which expires every copy, not only the evidence's.
    text: bool = False
    # Set by with_audit_retention on text topics when the text retention is finite: no
    # record outlives it (a compacted topic then also deletes by age: compact,delete).
    text_kept_ms: int | None = None
    # Holds the client's raw bytes: kept for the raw retention (with_audit_retention).
    raw: bool = False

    @property
    def partitions(self) -> int:
        return self.count or layout().count(self.group)

    def expires_after(self) -> int | None:
        """How long the broker keeps a record, in ms (None: forever, or compacted only)."""
        kept = None if self.compacted or self.retention_ms == FOREVER else self.retention_ms
        if self.text_kept_ms is None:
            return kept
        return self.text_kept_ms if kept is None else min(kept, self.text_kept_ms)

    def broker_config(self) -> dict[str, str]:
        # Every topic takes the contract's largest record (shared/contract/sizes.py); Kafka
        # refuses a larger one, and producers never send more.
        cfg = {"cleanup.policy": "compact" if self.compacted else "delete",
               "max.message.bytes": str(MAX_RECORD_BYTES)}
        expires = self.expires_after()
        if self.compacted and expires is not None:
            cfg["cleanup.policy"] = "compact,delete"  # newest per key, and none past its age
        if not self.compacted or expires is not None:
            cfg["retention.ms"] = str(FOREVER if expires is None else expires)
        if expires is not None:
            # Kafka deletes whole segments only: one rolled at least every retention period
            # lets a record expire within about two of them, not after a week's segment.
            cfg["segment.ms"] = str(min(expires, WEEK_MS))
        if self.evidence:
            cfg["retention.bytes"] = str(FOREVER)
        return {**cfg, **self.config}


@dataclass(frozen=True)
class TableSpec:
    app_id: str
    name: str
    key: str
    value: str
    # The topic whose agent writes the table: its changelog has the same partition count
    # (Faust refuses any other), so the table follows the source's group.
    source: TopicSpec

    @property
    def partitions(self) -> int:
        return self.source.partitions

    @property
    def changelog(self) -> str:
        return f"{self.app_id}-{self.name}-changelog"


DOCS_RAW = TopicSpec(
    "docs.raw.v1", "doc id (optional)", "JSON: plain document, Debezium envelope or API JSON",
    text=True, raw=True,
    doc="The input topic: produce here with any Kafka client.",
)
DOCS_PARSED = TopicSpec(
    "docs.parsed.v1", "doc id", "records.Document", text=True, raw=True,
    doc="Ingest's repartition topic: parsed documents re-keyed by doc id before dedup.",
)
# Unredacted text, as the client sent it: kept for the raw retention like docs.raw.v1.
DOCS_NORMALIZED = TopicSpec("docs.normalized.v1", "doc id", "records.Document", text=True,
                            raw=True, doc="New document versions and deletes, deduplicated.")
DOCS_REDACTED = TopicSpec("docs.redacted.v1", "doc id", "records.RedactedDocument",
                          retention_ms=FOREVER, evidence=True, text=True,
                          doc="Documents with every PII entity replaced by a placeholder.")
PII_SUBJECTS = TopicSpec(
    "pii.subjects.v1", "doc id", "records.SubjectIndex", compacted=True, text=True,
    doc="Who each redacted document version mentions, as keyed hashes of the masked "
        "values (never in clear); compacted to the newest version of each document, "
        "for `streamrag subjects`.",
)
CHUNKS = TopicSpec(
    "chunks.v1", "doc id", "records.ChunkSet", compacted=True, text=True,
    doc="All chunks of one document version (or a delete); compacted to the newest version "
        "of each document, so a new embedding model re-reads the whole corpus from it.",
)
CHUNKS_EMBEDDED = TopicSpec(
    "chunks.embedded.v1", "doc id (another model's: model id NUL doc id)",
    "records.EmbeddedChunkSet", compacted=True, text=True,
    doc="Chunks with vectors; compacted to the newest version of each document and model.",
)
SEARCH_REQUESTS = TopicSpec(
    "search.requests.v1", "request id", "records.SearchRequest", retention_ms=HOUR_MS,
    doc="Scatter: one request per partition; co-partitioned with chunks.embedded.v1.",
)
# Not co-partitioned with anything (inference reads every partition): in telemetry, so that
# growing the document topics (streamrag topics --grow) leaves it as it is.
SEARCH_REPLIES = TopicSpec("search.replies.v1", "request id", "records.SearchReply",
                           "telemetry", retention_ms=HOUR_MS, text=True,
                           doc="Gather: one reply per shard (the hits' chunk text).")
AUDIT_BATCHES = TopicSpec("audit.batches.v1", "partition of docs.normalized.v1",
                          "records.AuditBatch", "audit", retention_ms=FOREVER, evidence=True,
                          doc="One record per redaction micro-batch.")
AUDIT_QUERIES = TopicSpec(
    "audit.queries.v1", "query id", "records.QueryAudit", "audit", retention_ms=FOREVER,
    evidence=True,
    doc="One record per answered query: who asked (principal and grants), when, the "
        "question's hash, the chunks cited and the answer mode; batched into the audit trail "
        "like documents, so an auditor can prove who was shown what.",
)
LEDGER_ANCHORS = TopicSpec("ledger.anchors.v1", "batch id", "records.Anchor", "single",
                           retention_ms=FOREVER, evidence=True,
                           doc="The on-chain transaction that anchored each audit batch.")
DEADLETTER_RAW = TopicSpec(
    "deadletter.raw.v1", "source key", "records.DeadLetter", "single", text=True, raw=True,
    doc="Rejected raw input (before redaction): may hold raw PII, guard like docs.raw.v1.",
)
DEADLETTER = TopicSpec("deadletter.v1", "source key", "records.DeadLetter", "single",
                       doc="Rejected records past ingest: a payload hash, never the payload.")
FEEDBACK = TopicSpec("feedback.v1", "chunk id", "records.Feedback", "telemetry",
                     retention_ms=WEEK_MS,
                     doc="A user clicked or skipped a cited chunk (inference's Feedback RPC).")
QUERY_LATENCY = TopicSpec(
    "query.latency.v1", "gRPC method", "services.inference.telemetry.latency.QueryLatency",
    "telemetry", retention_ms=HOUR_MS,
    doc="One record per finished inference call, for the latency table.",
)
STREAM_STATS = TopicSpec(
    "stats.counts.v1", "source", "records.StreamCounts", "telemetry", retention_ms=HOUR_MS,
    doc="Per-change counts from ingest and PII counts from redaction, for the window tables.",
)
DRIFT_SAMPLES = TopicSpec(
    "drift.samples.v1", "source", "records.DriftSample", "telemetry", retention_ms=HOUR_MS,
    doc="One summary per embedded document version (retrieval), re-keyed by source so that "
        "one worker judges each source's drift.",
)
DRIFT_WINDOWS = TopicSpec(
    "drift.windows.v1", "source", "records.DriftReport", "telemetry", retention_ms=WEEK_MS,
    doc="One report per closed drift window of each source, domain and model; those with "
        "status drift are the drift events.",
)
CONFIG_QUERY = TopicSpec(
    "config.query.v1", "query/<version, 12 digits>", "query_config.QueryConfig", "single",
    compacted=True,
    doc="The query-path configuration, one key per version so compaction keeps the history; "
        "every inference instance reads it from the start and applies the newest valid one.",
)
# One partition: the inference instance the group assigns it to is the one SLO guard.
GUARD_SAMPLES = TopicSpec(
    "guard.samples.v1", "variant", "services.inference.guard.samples.GuardSample",
    "single", retention_ms=HOUR_MS,
    doc="Per-variant calls, probe results and feedback, for the SLO guard's window table; "
        "one partition, so one inference instance judges every variant's windows.",
)
GUARD_INCIDENTS = TopicSpec(
    "guard.incidents.v1", "incident id", "records.GuardIncident", "single",
    retention_ms=WEEK_MS,
    doc="The SLO guard's actions: the breaking windows and their figures, the version it "
        "wrote and the configuration diff (shown by streamrag status).",
)

TOPICS: tuple[TopicSpec, ...] = (
    DOCS_RAW, DOCS_PARSED, DOCS_NORMALIZED, DOCS_REDACTED, PII_SUBJECTS, CHUNKS,
    CHUNKS_EMBEDDED, SEARCH_REQUESTS, SEARCH_REPLIES, AUDIT_BATCHES, AUDIT_QUERIES, LEDGER_ANCHORS,
    DEADLETTER_RAW, DEADLETTER, FEEDBACK, QUERY_LATENCY, STREAM_STATS, DRIFT_SAMPLES,
    DRIFT_WINDOWS, CONFIG_QUERY, GUARD_SAMPLES, GUARD_INCIDENTS,
)

INGEST_APP = "streamrag-ingest"
REDACTION_APP = "streamrag-redaction"
CHUNKING_APP = "streamrag-chunking"
EMBEDDING_APP = "streamrag-embedding"
RETRIEVAL_APP = "streamrag-retrieval"
INFERENCE_APP = "streamrag-inference"
LEDGER_APP = "streamrag-ledger"
# One-process mode (services/onebox): every service's agents in one app, one consumer group.
ONEBOX_APP = "streamrag-onebox"

DOC_VERSIONS = TableSpec(INGEST_APP, "doc_versions", "doc id", "{hash, version, position}",
                         DOCS_PARSED)
SOURCE_CLOCKS = TableSpec(INGEST_APP, "source_clocks", "source@partition",
                          "{max_event_time, freshest_applied, late, lateness histogram}",
                          DOCS_PARSED)
ANCHORED = TableSpec(LEDGER_APP, "anchored_batches", "batch id", "Anchor JSON", AUDIT_BATCHES)
CHUNK_CLICKS = TableSpec(INFERENCE_APP, "chunk_clicks", "chunk id", "clicks, hopping 1 h",
                         FEEDBACK)
CHUNK_SKIPS = TableSpec(INFERENCE_APP, "chunk_skips", "chunk id", "skips, hopping 1 h",
                        FEEDBACK)
QUERY_LATENCIES = TableSpec(INFERENCE_APP, "query_latency", "method/bucket",
                            "calls per log-spaced latency bucket, tumbling 1 min", QUERY_LATENCY)
STATS_MINUTE = TableSpec(INFERENCE_APP, "stream_stats_minute", "[source, domain, kind]",
                         "count, tumbling 1 min", STREAM_STATS)
STATS_HOUR = TableSpec(INFERENCE_APP, "stream_stats_hour", "[source, domain, kind]",
                       "count, hopping 1 h", STREAM_STATS)
# Faust's key index of each windowed stats table (which keys exist, for listing them).
STATS_MINUTE_KEYS = TableSpec(INFERENCE_APP, f"{STATS_MINUTE.name}-key_index",
                              "[source, domain, kind]", "1", STREAM_STATS)
STATS_HOUR_KEYS = TableSpec(INFERENCE_APP, f"{STATS_HOUR.name}-key_index",
                            "[source, domain, kind]", "1", STREAM_STATS)
DRIFT_LATEST = TableSpec(INFERENCE_APP, "drift_latest", "[source, domain, model]",
                         "the newest DriftReport and the last drift event, JSON", DRIFT_WINDOWS)
GUARD_WINDOWS = TableSpec(INFERENCE_APP, "guard_windows", "variant/figure",
                          "calls, latency buckets, probe hits, clicks, skips; tumbling "
                          "guard window", GUARD_SAMPLES)

TABLES: tuple[TableSpec, ...] = (DOC_VERSIONS, SOURCE_CLOCKS, ANCHORED, CHUNK_CLICKS,
                                 CHUNK_SKIPS, QUERY_LATENCIES, STATS_MINUTE, STATS_HOUR,
                                 STATS_MINUTE_KEYS, STATS_HOUR_KEYS, DRIFT_LATEST,
                                 GUARD_WINDOWS)

SERVICES: dict[str, str] = {
    "ingest": INGEST_APP, "redaction": REDACTION_APP, "chunking": CHUNKING_APP,
    "embedding": EMBEDDING_APP, "retrieval": RETRIEVAL_APP, "inference": INFERENCE_APP,
    "ledger": LEDGER_APP,
}

# What each service consumes (its consumer group's topics), for lag and the compose check.
SERVICE_INPUTS: dict[str, tuple[TopicSpec, ...]] = {
    "ingest": (DOCS_RAW, DOCS_PARSED), "redaction": (DOCS_NORMALIZED,),
    "chunking": (DOCS_REDACTED,), "embedding": (CHUNKS,),
    "retrieval": (CHUNKS_EMBEDDED, SEARCH_REQUESTS, DRIFT_SAMPLES),
    "inference": (SEARCH_REPLIES, FEEDBACK, QUERY_LATENCY, STREAM_STATS, DRIFT_WINDOWS,
                  GUARD_SAMPLES),
    "ledger": (AUDIT_BATCHES, AUDIT_QUERIES),
}

# What each service produces to (its tables' changelogs aside). Only redaction writes
# redacted documents and audit records: the broker's ACLs (shared/contract/acls.py) hold it to that.
SERVICE_OUTPUTS: dict[str, tuple[TopicSpec, ...]] = {
    "ingest": (DOCS_PARSED, DOCS_NORMALIZED, DEADLETTER_RAW, DEADLETTER, STREAM_STATS),
    "redaction": (DOCS_REDACTED, PII_SUBJECTS, AUDIT_BATCHES, DEADLETTER, STREAM_STATS),
    "chunking": (CHUNKS, DEADLETTER), "embedding": (CHUNKS_EMBEDDED, DEADLETTER),
    "retrieval": (SEARCH_REPLIES, DEADLETTER, DRIFT_SAMPLES, DRIFT_WINDOWS),
    # The SLO guard writes configuration versions (as `streamrag config set` does).
    "inference": (SEARCH_REQUESTS, FEEDBACK, QUERY_LATENCY, DEADLETTER, GUARD_SAMPLES,
                  GUARD_INCIDENTS, CONFIG_QUERY, AUDIT_QUERIES),
    "ledger": (LEDGER_ANCHORS, DEADLETTER),
}

# Read by a plain consumer outside the service's group (no lag to report): redaction reads
# the tail of its own audit records back to rebuild its chain ends after a restart.
# Every inference instance follows config.query.v1 from its start (written by the CLI).
SERVICE_LOOKUPS: dict[str, tuple[TopicSpec, ...]] = {"redaction": (AUDIT_BATCHES,),
                                                     "inference": (CONFIG_QUERY,)}


def embedding_app(model_id: str) -> str:
    """The embedding app (its consumer group) of a model. Each model id keeps its own
    offsets on chunks.v1, so a deployment of a new model starts at the beginning of the
    compacted topic and embeds the whole corpus; all-MiniLM-L6-v2, the model the mesh
    started with, keeps the group it always had."""
    if model_id == MODEL_ID:
        return EMBEDDING_APP
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._")[:48]
    tag = hashlib.blake2b(model_id.encode(), digest_size=4).hexdigest()
    return f"{EMBEDDING_APP}.{readable}-{tag}"


def embedded_key(model_id: str, doc_id: str) -> bytes:
    """A chunks.embedded.v1 key: one per document and model, so compaction keeps every
    model's newest version (all-MiniLM-L6-v2's records keep the plain doc id they had)."""
    return (doc_id if model_id == MODEL_ID else f"{model_id}\0{doc_id}").encode()


def service_tables(service: str) -> tuple[TableSpec, ...]:
    return tuple(t for t in TABLES if t.app_id == SERVICES[service])


# Topic pairs that must have equal partition counts: Faust's assignor gives one worker the
# same partition numbers of equal-sized topics it reads together, which is what routes
# search request partition p to the worker holding shard p (chunks.embedded.v1 partition p).
COPARTITIONED: tuple[tuple[TopicSpec, TopicSpec], ...] = ((SEARCH_REQUESTS, CHUNKS_EMBEDDED),)


def all_topic_specs(layout: PartitionSettings | None = None) -> tuple[TopicSpec, ...]:
    """Every topic to create at bring-up, table changelogs included, sized by `layout`
    (default: this process's settings); each changelog has its source topic's count."""
    changelogs = tuple(
        TopicSpec(t.changelog, t.key, t.value, t.source.group, compacted=True)
        for t in TABLES
    )
    specs = TOPICS + changelogs
    return specs if layout is None else resized(specs, layout)


def resized(specs: tuple[TopicSpec, ...], layout: PartitionSettings) -> tuple[TopicSpec, ...]:
    """`specs` with each topic's partition count taken from `layout` by its group."""
    return tuple(replace(s, count=layout.count(s.group)) for s in specs)


def check_copartitioned(specs: tuple[TopicSpec, ...]) -> None:
    """ConfigError when a co-partitioned pair (COPARTITIONED) differs in `specs`."""
    counts = {s.name: s.partitions for s in specs}
    for a, b in COPARTITIONED:
        if a.name in counts and b.name in counts and counts[a.name] != counts[b.name]:
            msg = (f"{a.name} has {counts[a.name]} partitions and {b.name} {counts[b.name]}: "
                   f"they must be equal, since search request partition p is answered by "
                   f"the worker that holds shard p (partition p of {b.name}); both are in "
                   f"the {b.group!r} group (STREAMRAG_KAFKA_PARTITIONS_{b.group.upper()})")
            raise ConfigError(msg)


def with_audit_retention(specs: tuple[TopicSpec, ...], retention_ms: int,
                         text_retention_ms: int | None = None,
                         raw_retention_ms: int | None = None) -> tuple[TopicSpec, ...]:
    """`specs` with every evidence topic kept for `retention_ms` (FOREVER: -1), and, where
    `text_retention_ms` is set and finite, every topic that carries document text (the raw
    input, its parsed and normalized copies, the redacted text, the chunks with and without
    vectors, search replies, raw dead letters) kept no longer than that: the text expires
    from every copy on the broker, not only from docs.redacted.v1. The client's raw bytes
    (docs.raw.v1, deadletter.raw.v1) are kept for `raw_retention_ms` where that is set."""
    def kept(spec: TopicSpec) -> int:
        if spec.name == DOCS_REDACTED.name and text_retention_ms is not None:
            return text_retention_ms
        return retention_ms
    finite = text_retention_ms not in (None, FOREVER)
    out = []
    for spec in specs:
        if spec.raw and raw_retention_ms is not None:
            spec = replace(spec, retention_ms=raw_retention_ms)
        if spec.evidence:
            spec = replace(spec, retention_ms=kept(spec))
        if spec.text and finite and not spec.evidence:
            spec = replace(spec, text_kept_ms=text_retention_ms)
        out.append(spec)
    return tuple(out)

