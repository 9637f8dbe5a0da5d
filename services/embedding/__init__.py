"""Embedding: micro-batched vectors for every chunk from the configured sentence encoder."""
