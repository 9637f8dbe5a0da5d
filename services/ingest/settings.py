"""Ingest settings (env prefix STREAMRAG_INGEST_)."""

from __future__ import annotations

from pydantic import BaseModel, Field
from pydantic_settings import SettingsConfigDict

from shared.settings import ServiceSettings


class FieldMapping(BaseModel):
    """Where a source keeps a document's parts; paths are dotted (`ticket.subject`)."""

    id: str = "id"
    text: str = "text"
    title: str | None = None
    event_time: str | None = None
    domain: str | None = None  # a path into the record ...
    default_domain: str = "default"  # ... or this when absent
    metadata: dict[str, str] = Field(default_factory=dict)  # metadata key -> path


class IngestSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="STREAMRAG_INGEST_", frozen=True)

    max_payload_bytes: int = Field(default=1_048_576, ge=1024)
    max_id_length: int = Field(default=512, ge=1)
    # Debezium tables: "<db>.<table>" or "<table>" -> mapping of the row's columns.
    cdc_mappings: dict[str, FieldMapping] = Field(default_factory=lambda: {
        "*": FieldMapping(id="id", text="body", title="title", default_domain="database"),
    })
    # API sources, chosen by the record header `streamrag-source`.
    api_mappings: dict[str, FieldMapping] = Field(default_factory=lambda: {
        "tickets": FieldMapping(
            id="ticket.id", text="ticket.description", title="ticket.subject",
            event_time="ticket.updated_at", default_domain="support",
            metadata={"priority": "ticket.priority", "status": "ticket.status"},
        ),
    })
