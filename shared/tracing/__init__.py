"""Traces: W3C trace context on every record and every query, spans per stage through the
OpenTelemetry SDK, exported over OTLP when STREAMRAG_TRACING_EXPORTER says so.

- `context`: the `traceparent` header (pure): read, made, and the one each send carries.
- `settings`: STREAMRAG_TRACING_*, process-wide like STREAMRAG_DATA_DIR.
- `spans`: the spans (OpenTelemetry imported only when tracing is on).
"""
