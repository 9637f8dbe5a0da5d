"""A redacted document to its ChunkSet, with token counts from the embedding tokenizer."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from services.chunking.chunker import Offsets, chunk_id, chunk_layout, token_starts
from shared.records import Chunk, ChunkSet, RedactedDocument

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class DocumentChunker:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_tokens: int,
                 overlap_tokens: int = 0) -> None:
        if not 0 <= overlap_tokens < max_tokens // 2:
            raise ValueError(f"overlap {overlap_tokens} must be below half of {max_tokens}")
        tokenizer.model_max_length = 1 << 30  # we only count tokens here, never run the model
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens

    def offsets(self, text: str) -> Offsets:
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return enc["offset_mapping"]

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def pieces(self, text: str) -> list[tuple[str, int, int]]:
        """(chunk text, overlap prefix length, tokens) per chunk; whitespace-only ones dropped."""
        offsets = self.offsets(text)
        starts = token_starts(offsets)
        out = []
        for lead, a, b in chunk_layout(text, offsets, self.max_tokens, self.overlap_tokens):
            if text[a:b].strip():
                lead, tokens = self._fit(text, starts, lead, a, b)
                out.append((text[lead:b], a - lead, tokens))
        return out

    def _fit(self, text: str, starts: list[int], lead: int, a: int, b: int) -> tuple[int, int]:
        # Re-tokenising a slice can differ from the whole text's offsets by a token at the
        # seam; drop overlap tokens from the front until the chunk really fits.
        tokens = self.count(text[lead:b])
        while lead < a and tokens > self.max_tokens:
            i = bisect.bisect_right(starts, lead)
            lead = starts[i] if i < len(starts) and starts[i] < a else a
            tokens = self.count(text[lead:b])
        return lead, tokens

    def chunk(self, doc: RedactedDocument) -> ChunkSet:
        chunks: tuple[Chunk, ...] = ()
        if doc.op == "upsert":
            chunks = tuple(
                Chunk(chunk_id=chunk_id(doc.doc_id, doc.version, i, part), ordinal=i,
                      text=part, token_count=tokens, overlap_chars=lead)
                for i, (part, lead, tokens) in enumerate(self.pieces(doc.text))
            )
        return ChunkSet(
            doc_id=doc.doc_id, version=doc.version, op=doc.op, title=doc.title,
            source=doc.source, domain=doc.domain, event_time=doc.event_time,
            ingest_time=doc.ingest_time, chunks=chunks,
        )
