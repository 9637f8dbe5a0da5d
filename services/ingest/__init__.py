"""Ingest: parse heterogeneous input into Document records, validate, deduplicate, version."""
