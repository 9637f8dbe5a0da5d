"""Records that travel on the mesh's topics, one model per topic value.

Every record carries `schema_version`; `shared.contract.codec.decode` accepts the versions
a reader knows and raises InvalidInput(unknown_schema_version) for the rest.
"""

from __future__ import annotations

import base64
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

Op = Literal["upsert", "delete"]


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    KNOWN_VERSIONS: ClassVar[frozenset[int]] = frozenset({1})
    schema_version: int = 1


class Position(BaseModel):
    """Where a change sits in its source's order (services.ingest.ordering builds them).

    Only positions of one `kind` compare, key by key as integers: `pg_lsn` (the
    Postgres LSN), `mysql_binlog` (binlog file number, position, row), `ts_ms` (Debezium's
    milliseconds), `version` (a source's own version number), `event_time` (microseconds).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["pg_lsn", "mysql_binlog", "ts_ms", "version", "event_time"]
    key: tuple[int, ...]


class Document(Record):
    """One version of a document (or its delete), normalised from any input kind."""

    doc_id: str
    version: int = Field(ge=1)
    op: Op = "upsert"
    text: str = ""
    title: str = ""
    source: str
    source_kind: Literal["document", "cdc", "api"] = "document"
    domain: str = "default"
    event_time: float  # seconds since the epoch
    ingest_time: float
    metadata: dict[str, str] = Field(default_factory=dict)
    content_hash: str = ""
    # The source's ordering key; None on records written before ingest kept one.
    position: Position | None = None
    # The source declared that its ids live in a space other sources share (a mapping's
    # id_space): only then may a document id move between sources (ingest's dedup).
    shared_id: bool = False
    # Access labels (shared.contract.access): who may read this document and every chunk of
    # it. () is deny by default (only an all-access caller reads it); ingest fills in the
    # configured default when the input names none.
    acl: tuple[str, ...] = ()
    # Sealed (shared/contract/sealed.py): title, text and metadata are "", {} and this
    # holds them encrypted under the data key `key_id` (shared/keys): on docs.parsed.v1 the
    # document's transit key, on docs.normalized.v1 and docs.redacted.v1 its version's.
    # "": in clear (records written before sealing, deletes, forget requests and receipts).
    key_id: str = ""
    sealed: str = ""


class TableTruncate(Record):
    """A Debezium truncate of one table, sent by ingest to every partition of
    docs.parsed.v1 (header `streamrag-kind: truncate`): each partition's dedup deletes the
    documents of `source` it holds that are older than `position`."""

    source: str
    domain: str = "default"
    event_time: float
    ingest_time: float
    position: Position | None = None


class RedactedDocument(Document):
    """A Document after redaction: text, title and metadata hold no raw PII."""

    entity_counts: dict[str, int] = Field(default_factory=dict)
    batch_id: str = ""


class SubjectIndex(Record):
    """Who one redacted document version mentions, as keys (shared/contract/subjects.py):
    HMAC-SHA256 under the subject key of each masked e-mail, phone number, name and
    identifier. Never a value in clear; a version that mentions nobody has no keys, so it
    supersedes an older version that did."""

    doc_id: str
    version: int
    batch_id: str = ""  # the audit batch of the redacted version
    key_id: str  # subjects.key_id of the key the keys are under
    subjects: tuple[str, ...] = ()  # hex keys, sorted, each once
    kinds: dict[str, int] = Field(default_factory=dict)  # keys per kind


class Chunk(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    chunk_id: str
    ordinal: int
    text: str
    token_count: int
    # text[:overlap_chars] repeats the end of the previous chunk (chunking overlap), so
    # "".join(c.text[c.overlap_chars:] for c in chunks) gives the document text back.
    overlap_chars: int = Field(default=0, ge=0)


class ChunkSet(Record):
    """All chunks of one document version; op=delete carries none."""

    doc_id: str
    version: int
    op: Op = "upsert"
    title: str = ""
    source: str
    domain: str
    event_time: float
    ingest_time: float
    chunks: tuple[Chunk, ...] = ()
    acl: tuple[str, ...] = ()  # the document version's access labels, for every chunk
    # Sealed (shared/contract/sealed.py): the title and every chunk's text are "" and this
    # holds them encrypted under the version's data key `key_id`; "": in clear.
    key_id: str = ""
    sealed: str = ""


class EmbeddedChunk(Chunk):
    vector: str  # base64 of little-endian float32, L2-normalised

    def array(self) -> np.ndarray:
        return decode_vector(self.vector)


class EmbeddedChunkSet(Record):
    doc_id: str
    version: int
    op: Op = "upsert"
    title: str = ""
    source: str
    domain: str
    event_time: float
    ingest_time: float
    model_id: str
    dim: int
    chunks: tuple[EmbeddedChunk, ...] = ()
    acl: tuple[str, ...] = ()  # the document version's access labels, for every chunk
    # Sealed: the title, every chunk's text and every vector (a vector gives text away to
    # an inversion model) are "" and this holds them under the data key `key_id`.
    key_id: str = ""
    sealed: str = ""


class SearchSpec(BaseModel):
    """One query of a batched SearchRequest."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    query_id: str
    vector: str  # base64 of little-endian float32, L2-normalised
    top_k: int = Field(ge=1, le=1000)
    # The question's words for the shard's BM25 index (hybrid search); "" asks only FAISS.
    text: str = ""
    since: float | None = None
    until: float | None = None
    domain: str | None = None
    source: str | None = None
    # Who asks (shared.contract.access.Access): the shard admits a chunk only when one of
    # `groups` is among its labels, in the same mask as the filters above, or every chunk
    # when `all_access`. The defaults admit public documents only (fail closed).
    groups: tuple[str, ...] = ("public",)
    all_access: bool = False


class SearchRequest(Record):
    """A batch of queries for one shard (the partition it is sent to).

    Version 2: one request carries up to MAX_SEARCH_BATCH queries (version 1 carried one),
    so a batch of questions costs one message per shard instead of one per question.
    """

    KNOWN_VERSIONS: ClassVar[frozenset[int]] = frozenset({2})
    schema_version: int = 2
    request_id: str
    partition: int
    model_id: str
    dim: int
    deadline: float  # seconds since the epoch; a shard past it does not answer
    queries: tuple[SearchSpec, ...] = Field(min_length=1, max_length=256)


class SearchHit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    chunk_id: str
    doc_id: str
    version: int
    score: float  # inner product with the question (after fusion: the fused score)
    event_time: float
    text: str
    title: str = ""
    domain: str
    source: str
    lexical: float = 0.0  # BM25 of the chunk for the question's text (hybrid search)
    # The chunk's access labels: the shard's columns and snapshots keep them with the hit;
    # inference never shows them to a caller.
    acl: tuple[str, ...] = ()


class QueryHits(BaseModel):
    """One query's top k from one shard, or why that query got none."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    query_id: str
    hits: tuple[SearchHit, ...] = ()
    error: str = ""


class SearchReply(Record):
    """A shard's answer to a SearchRequest: one QueryHits per query, or one error for all."""

    KNOWN_VERSIONS: ClassVar[frozenset[int]] = frozenset({2})
    schema_version: int = 2
    request_id: str
    partition: int
    results: tuple[QueryHits, ...] = ()
    shard_size: int = 0
    error: str = ""  # the whole batch failed ("recovering", "model_mismatch")


class AuditLeaf(BaseModel):
    """The canonical record hashed into a batch's Merkle tree."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    doc_id: str
    version: int
    redacted_sha256: str
    raw_sha256: str
    offset: int
    # Set: raw_sha256 is an HMAC-SHA256 under this version key (shared/keys), so nobody
    # without the key, and nobody at all once it is destroyed, can test a guessed text
    # against the anchored root; redacted_sha256 covers the sealed record. "": plain
    # sha256 of both (leaves before data keys).
    key_id: str = ""


class AuditBatch(Record):
    batch_id: str  # "<epoch>/<topic>/<partition>/<first offset>-<last offset>"
    partition: int
    # The input offsets the batch consumed, dead-lettered records included: a redelivery
    # of any of them after this record is on the broker is skipped, not batched again.
    first_offset: int
    last_offset: int
    doc_count: int
    entity_counts: dict[str, int]
    analyzer_fingerprint: str
    leaves: tuple[AuditLeaf, ...]
    root: str
    prev_root: str
    created_at: float
    # The incarnation of the audit log (new when a partition's chain starts afresh, e.g. on
    # a broker whose log was deleted), so batch ids never repeat across incarnations.
    epoch: str = ""
    # Address of the redaction key and its EIP-191 signature (shared.contract.audit_signing).
    signer: str = ""
    signature: str = ""


class Anchor(Record):
    batch_id: str
    root: str
    tx_hash: str
    block_number: int
    contract: str
    chain_id: int
    anchored_at: float
    batch_closed_at: float
    # What re-anchoring needs (a node that lost its last seconds, a reorg); None: not recorded.
    prev_root: str | None = None
    leaf_count: int | None = None
    signer: str | None = None  # the audit record's signer, as the contract records it


class DeadLetter(Record):
    stage: str
    reason: str
    field: str | None = None
    detail: str = ""
    source_topic: str
    partition: int
    offset: int
    key: str | None = None  # up to 1 KiB as given; a longer one cut (contract.dlq.bounded_key)
    key_sha256: str | None = None
    key_size: int = 0
    payload_sha256: str
    payload_size: int
    payload_b64: str | None = None  # only on deadletter.raw.v1 (before redaction)
    at: float


class StreamCounts(Record):
    """What one stage saw of one source and domain (stats.counts.v1, keyed by source).

    `counts` keys: `received`, `new`, `updated`, `deleted` (ingest, per change),
    `dead_lettered.<reason>` (ingest), `pii.<entity type>` (redaction, per batch).
    """

    source: str = Field(max_length=512)
    domain: str = Field(max_length=512)
    counts: dict[str, int]
    at: float  # seconds since the epoch


class DriftSample(Record):
    """One document version as the drift detector sees it (drift.samples.v1, keyed by
    source): its chunks' mean vector and its most frequent words. Retrieval sends one per
    embedded upsert; chunk text is redacted at that stage, so the words are too."""

    source: str = Field(max_length=512)
    domain: str = Field(max_length=512)
    model_id: str = Field(max_length=512)
    doc_id: str
    version: int
    title: str = Field(default="", max_length=200)
    ingest_time: float  # seconds since the epoch: the window clock (docs/design/drift.md)
    chunks: int = Field(ge=1)
    vector: str  # base64 of little-endian float32, L2-normalised mean of the chunk vectors
    terms: dict[str, int] = Field(default_factory=dict, max_length=32)


class DriftDocument(BaseModel):
    """A document of a drifting window, far from the reference centroid."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    doc_id: str
    version: int
    title: str = ""
    distance: float  # cosine distance to the reference windows' centroid


DriftStatus = Literal["drift", "stable", "warming_up", "too_few_docs"]


class DriftReport(Record):
    """One closed window of one source, domain and model (drift.windows.v1, keyed by
    source). status `drift` is a drift event; `warming_up` and `too_few_docs` were not
    judged (too little history, too few documents). Scores are logs of the centroid
    statistic (about 0 for a stationary stream); z is against the last `history` windows."""

    source: str
    domain: str
    model_id: str
    window_start: float
    window_end: float
    docs: int
    # Samples of an earlier window that arrived after it closed since the previous report:
    # counted in this window (docs), or dropped when they were of the past (a replay).
    late: int = 0
    dropped: int = 0  # of `late`: counted in no window
    status: DriftStatus
    score: float | None = None
    z: float | None = None
    mean: float | None = None
    std: float | None = None
    history: int = 0
    threshold: float
    documents: tuple[DriftDocument, ...] = ()  # on a drift event: the farthest documents
    terms: tuple[str, ...] = ()  # on a drift event: words most over-represented vs history
    at: float  # when the window was closed


class Feedback(Record):
    """A user clicked or skipped a chunk an answer cited (feedback.v1, keyed by chunk id)."""

    chunk_id: str = Field(min_length=1, max_length=512)
    kind: Literal["click", "skip"]
    at: float  # seconds since the epoch
    # The query configuration version and variant of the answer that cited the chunk, as
    # the caller reported them ("" and 0: not reported).
    variant: str = Field(default="", max_length=32)
    config_version: int = Field(default=0, ge=0)


class GuardWindow(BaseModel):
    """One breaking window of the variant an SLO guard incident is about."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    start: float
    end: float
    calls: int
    errors: int
    p99_ms: float
    probe_hit_rate: float | None
    reference_probe_hit_rate: float | None
    clicks: int
    skips: int
    breaches: tuple[str, ...]  # broken on its own: what the guard acts on
    shared: tuple[str, ...] = ()  # broken by the reference variant as well: reported only
    slow: int = 0  # calls over the latency objective
    overdue: int = 0  # of the calls: still in flight past the latency objective
    cancelled: int = 0  # of the calls: cancelled by their caller or deadline


class GuardIncident(Record):
    """An SLO guard action or report (guard.incidents.v1, keyed by incident id; one record
    per tier)."""

    incident: str = Field(min_length=1, max_length=128)
    variant: str = Field(max_length=32)
    # 0: reported, nothing written; 1: routing to the variant stopped; 2: rolled back
    tier: int = Field(ge=0, le=2)
    # stop, rollback; alert: the main (largest-weight) variant broke an objective on its
    # own, shared: every variant judged broke it, samples: too few calls to judge the
    # variant (needed_qps says how much traffic it needs); "": a record from before kinds.
    kind: Literal["", "stop", "rollback", "alert", "shared", "samples"] = ""
    needed_qps: float | None = None  # samples: queries/s in all the variant needs
    at: float
    from_version: int = Field(ge=0)  # the version acted on
    version: int | None = None  # the version the guard wrote (None: it wrote none)
    rollback_of: int | None = None
    note: str = Field(default="", max_length=512)
    windows: tuple[GuardWindow, ...] = ()
    diff: dict[str, tuple[object, object]] = Field(default_factory=dict)  # path: (old, new)


def encode_vector(vec: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(data: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(data), dtype="<f4")


class QueryAudit(Record):
    """One answered call (audit.queries.v1, keyed by query id): who asked, when, what the
    caller was shown and what the answer cited. Never the question nor the caller's subject:
    their hashes (services/inference/audit/record.py, docs/design/audit-trail.md)."""

    query_id: str = Field(min_length=1, max_length=128)
    method: str = Field(max_length=32)  # Query, StreamQuery or Retrieve
    # HMAC-SHA256 of the token's subject under the audit principal key ("hmac-sha256:<hex>"),
    # "" when the call had none (open mode, the static service token, anonymous).
    principal: str = Field(max_length=96)
    principal_kind: str = Field(max_length=16)  # open, service, user, anonymous
    # Access.scope() of the call, its user:<subject> grant as user:<the same hash>.
    scope: str
    at: float
    question_sha256: str = Field(min_length=64, max_length=64)
    answer_mode: str = Field(max_length=32)  # "" for Retrieve (no answer)
    shown: tuple[str, ...] = ()  # chunk ids the caller was shown, in order
    docs: tuple[str, ...] = ()  # "<doc id>@v<version>" of each shown chunk
    cited: tuple[str, ...] = ()  # chunk ids the answer cites
    # False: a StreamQuery cut off or failed after its citations were sent, before its
    # answer ended (what it showed is recorded; what the unfinished answer cited is not).
    finished: bool = True
    variant: str = ""
    config_version: int = 0
    # Address of inference's query-audit key and its EIP-191 signature over the rest
    # (shared.contract.audit_signing).
    signer: str = ""
    signature: str = ""
