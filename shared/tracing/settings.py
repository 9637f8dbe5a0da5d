"""Where traces go and how many are kept (env prefix STREAMRAG_TRACING_, one per process)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class TracingSettings(BaseSettings):
    """OpenTelemetry traces of every stage and query (docs/design/observability.md)."""

    model_config = SettingsConfigDict(env_prefix="STREAMRAG_TRACING_", frozen=True)

    # Where finished spans go: "none" (the default: no span is made and OpenTelemetry is
    # never imported; records still carry their trace context onward), "otlp" (gRPC to
    # otlp_endpoint, a collector) or "console" (one JSON object per span on stderr).
    exporter: Literal["none", "otlp", "console"] = "none"
    # The OTLP/gRPC collector spans are sent to (exporter "otlp").
    otlp_endpoint: str = "http://127.0.0.1:4317"
    # Share of new traces kept (0..1), decided where a trace starts: by ingest for a record
    # that arrives without a traceparent, by inference for a query without one. A record or
    # query that brings its own keeps its sampled flag, whatever this says.
    sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    # The most spans queued for export; beyond it new spans are dropped (the SDK logs how
    # many), so a slow collector never blocks a stage.
    max_queue_spans: int = Field(default=8192, ge=64)
    # How often queued spans are exported, in milliseconds.
    export_interval_ms: int = Field(default=1000, ge=10, le=60_000)
