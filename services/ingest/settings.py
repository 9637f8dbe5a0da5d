"""Ingest settings (env prefix STREAMRAG_INGEST_)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import AwareDatetime, BaseModel, Field, field_validator
from pydantic_settings import SettingsConfigDict

from shared.contract.access import parse_acl
from shared.contract.retention import seconds_kept
from shared.errors import InvalidInput
from shared.settings import ServiceSettings

CDC_ACL_COLUMN = "acl"  # the column a CDC row's labels come from when a mapping names none


class FieldMapping(BaseModel):
    """Where a source keeps a document's parts; paths are dotted (`ticket.subject`)."""

    id: str = "id"
    text: str = "text"
    title: str | None = None
    event_time: str | None = None
    version: str | None = None  # an integer that orders changes; else the event time does
    domain: str | None = None  # a path into the record ...
    default_domain: str = "default"  # ... or this when absent
    metadata: dict[str, str] = Field(default_factory=dict)  # metadata key -> path
    # Where the record keeps its access labels (a list of labels or one comma-separated
    # string; shared.contract.access). None: a CDC row's `acl` column when it has one, no
    # path for an API record; "": never read from the record. A record without labels
    # there gets STREAMRAG_INGEST_DEFAULT_ACL.
    acl: str | None = None
    # The id space the row's key lives in. None: its own table's for a CDC row (doc id
    # `db.table/<key>`), the source's for an API record (the bare key). A name (or "" for
    # bare keys) says that several tables, or a table and plain documents, share ids: only
    # then may one document id be written by more than one source.
    id_space: str | None = None


class IngestSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_INGEST_", frozen=True)

    # Port of this worker's Prometheus /metrics (its stages' counters); 0: not served.
    # With several services in one process, the first one set serves them all.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # The address /metrics listens on.
    metrics_host: str = "127.0.0.1"

    # Seal what ingest writes on (docs.parsed.v1 under the document's transit key,
    # docs.normalized.v1 under the version's data key: shared/keys), so a forget or the
    # text retention leaves no readable copy there; false writes them in clear.
    seal: bool = True
    # How long one transit key seals a document's parsed changes before a new one is made
    # (a forget of the document makes one at once); the retention destroys them by age.
    transit_rotate_s: float = Field(default=3600.0, gt=0)
    # The mesh-wide STREAMRAG_AUDIT_TEXT_RETENTION_MS, read under that name: the keys it
    # destroys by age include the transit keys, so these rotate every tenth of it.
    text_retention_ms: int | None = Field(default=None,
                                          validation_alias="STREAMRAG_AUDIT_TEXT_RETENTION_MS")

    @property
    def transit_rotation_s(self) -> float:
        """How long one transit key is used: never long enough for the text retention to
        take it while what it sealed still waits for dedup."""
        kept = seconds_kept(self.text_retention_ms)
        return self.transit_rotate_s if kept is None else min(self.transit_rotate_s,
                                                              kept / 10)

    # The largest raw record accepted, in bytes; larger ones are refused.
    max_payload_bytes: int = Field(default=1_048_576, ge=1024)
    # The longest document id accepted, in characters.
    max_id_length: int = Field(default=512, ge=1)
    # The deepest JSON nesting accepted, checked on the raw text before parsing.
    max_json_depth: int = Field(default=64, ge=2, le=500)
    # The longest run of digits in a JSON number accepted, checked before parsing.
    max_number_digits: int = Field(default=40, ge=16, le=4000)
    # The earliest event time accepted; earlier is refused (event_time_out_of_range).
    min_event_time: AwareDatetime = datetime(1970, 1, 1, tzinfo=UTC)
    # Event times at or after this are refused (event_time_out_of_range).
    max_event_time: AwareDatetime = datetime(2100, 1, 1, tzinfo=UTC)
    # A change whose event time is this far behind the newest seen on its source and
    # partition is late (counted; still applied when newer for its document).
    allowed_lateness_s: float = Field(default=300.0, ge=0)
    # A Debezium truncate deletes every document of its table (true), or is refused as
    # truncate_refused (false: the default, since one record then removes a whole table).
    apply_truncates: bool = False
    # The access labels of a document whose input names none (comma-separated): empty
    # denies by default (only an all-access caller reads it); "public" opens it to every
    # caller. An input that gives labels, even an empty list, keeps its own.
    default_acl: str = ""
    # Where Debezium rows keep a document's parts: "<db>.<table>" or "<table>" (or "*")
    # -> mapping of the row's columns.
    cdc_mappings: dict[str, FieldMapping] = Field(default_factory=lambda: {
        "*": FieldMapping(id="id", text="body", title="title", default_domain="database"),
    })
    # Where API records keep a document's parts, per source (chosen by the record header
    # `streamrag-source`) -> mapping of the record's fields.
    api_mappings: dict[str, FieldMapping] = Field(default_factory=lambda: {
        "tickets": FieldMapping(
            id="ticket.id", text="ticket.description", title="ticket.subject",
            event_time="ticket.updated_at", default_domain="support", acl="ticket.acl",
            metadata={"priority": "ticket.priority", "status": "ticket.status"},
        ),
    })

    @field_validator("default_acl")
    @classmethod
    def _labels(cls, value: str) -> str:
        try:
            parse_acl(value, "default_acl")
        except InvalidInput as exc:
            msg = f"STREAMRAG_INGEST_DEFAULT_ACL: {exc.detail}"
            raise ValueError(msg) from exc
        return value

    @property
    def default_labels(self) -> tuple[str, ...]:
        return parse_acl(self.default_acl, "default_acl")
