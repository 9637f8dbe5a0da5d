"""Redaction: replace PII before anything is chunked; audit every micro-batch."""
