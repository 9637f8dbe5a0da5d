"""Inference: embed a question, scatter it to the retrieval shards, answer with citations."""
