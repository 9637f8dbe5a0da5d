"""Retrieval: one FAISS shard per partition of chunks.embedded.v1, answering scattered searches."""
