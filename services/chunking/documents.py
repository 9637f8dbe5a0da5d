"""A redacted document to its ChunkSet, with token counts from the embedding tokenizer."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from services.chunking.chunker import Offsets, chunk_id, split
from shared.records import Chunk, ChunkSet, RedactedDocument


class DocumentChunker:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_tokens: int) -> None:
        tokenizer.model_max_length = 1 << 30  # we only count tokens here, never run the model
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens

    def offsets(self, text: str) -> Offsets:
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return enc["offset_mapping"]

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def chunk(self, doc: RedactedDocument) -> ChunkSet:
        chunks: tuple[Chunk, ...] = ()
        if doc.op == "upsert":
            parts = [p for p in split(doc.text, self.offsets, self.max_tokens) if p.strip()]
            chunks = tuple(
                Chunk(chunk_id=chunk_id(doc.doc_id, doc.version, i, part), ordinal=i,
                      text=part, token_count=self.count(part))
                for i, part in enumerate(parts)
            )
        return ChunkSet(
            doc_id=doc.doc_id, version=doc.version, op=doc.op, title=doc.title,
            source=doc.source, domain=doc.domain, event_time=doc.event_time,
            ingest_time=doc.ingest_time, chunks=chunks,
        )
