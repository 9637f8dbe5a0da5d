"""Embedding: micro-batched all-MiniLM-L6-v2 vectors for every chunk."""
