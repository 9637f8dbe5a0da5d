"""Chunking: split redacted documents into token-budgeted chunks at semantic boundaries."""
