"""Embed the chunks of many ChunkSets in one model call and attach the vectors.

Each chunk is encoded with its document's title in front (shared/encoder/passage.py), as the
chunking service budgeted for it; the stored chunk text stays the text alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.contract.records import ChunkSet, EmbeddedChunk, EmbeddedChunkSet, encode_vector
from shared.encoder.passage import clip_title, passage
from shared.encoder.runtime import SentenceEncoder

SPECIAL_TOKENS = 2  # [CLS] and [SEP] around every chunk the model sees


def longest_chunk(chunk_set: ChunkSet) -> int:
    """Tokens of the set's longest chunk as the model pads it (special tokens included)."""
    return max((c.token_count for c in chunk_set.chunks), default=0) + SPECIAL_TOKENS


def embed_sets(encoder: SentenceEncoder, sets: Sequence[ChunkSet], max_batch_tokens: int,
               ) -> list[EmbeddedChunkSet]:
    titles = [clip_title(encoder.tokenizer, s.title) if s.title.strip() else "" for s in sets]
    texts = [passage(title, chunk.text) for s, title in zip(sets, titles, strict=True)
             for chunk in s.chunks]
    vectors = iter(encoder.encode(texts, max_batch_tokens=max_batch_tokens))
    out = []
    for s in sets:
        chunks = tuple(EmbeddedChunk(**c.model_dump(), vector=encode_vector(next(vectors)))
                       for c in s.chunks)
        out.append(EmbeddedChunkSet(
            **s.model_dump(exclude={"chunks", "schema_version"}),
            model_id=encoder.model_id, dim=encoder.dim, chunks=chunks,
        ))
    return out
