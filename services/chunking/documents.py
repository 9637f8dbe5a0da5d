"""A redacted document to its ChunkSet, with token counts from the embedding tokenizer.

The document's title leads every chunk's embedding input (shared/encoder/passage.py), so the
chunk text gets the budget the title leaves: max_tokens minus the clipped title's tokens,
but never under half of max_tokens (a tiny budget with a long title would leave no room).
A chunk's token_count is what the encoder sees: title and text.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from services.chunking.chunker import Offsets, chunk_id, chunk_layout, token_starts
from shared.contract.records import Chunk, ChunkSet, RedactedDocument
from shared.encoder.passage import clip_title, passage

if TYPE_CHECKING:
    from shared.encoder.tokenizer import TextTokenizer


class DocumentChunker:
    def __init__(self, tokenizer: TextTokenizer, max_tokens: int,
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

    def text_budget(self, title: str) -> int:
        """Tokens left for a chunk's text beside this (clipped) title."""
        title_tokens = self.count(title) if title else 0
        return max(self.max_tokens - title_tokens, self.max_tokens // 2)

    def pieces(self, text: str, budget: int | None = None) -> list[tuple[str, int, int]]:
        """(chunk text, overlap prefix length, tokens) per chunk; whitespace-only ones dropped."""
        budget = budget or self.max_tokens
        offsets = self.offsets(text)
        starts = token_starts(offsets)
        out = []
        for lead, a, b in chunk_layout(text, offsets, budget, self.overlap_tokens):
            if text[a:b].strip():
                lead, tokens = self._fit(text, starts, lead, a, b, budget)
                out.append((text[lead:b], a - lead, tokens))
        return out

    def _fit(self, text: str, starts: list[int], lead: int, a: int, b: int,
             budget: int) -> tuple[int, int]:
        # Re-tokenising a slice can differ from the whole text's offsets by a token at the
        # seam; drop overlap tokens from the front until the chunk really fits.
        tokens = self.count(text[lead:b])
        while lead < a and tokens > budget:
            i = bisect.bisect_right(starts, lead)
            lead = starts[i] if i < len(starts) and starts[i] < a else a
            tokens = self.count(text[lead:b])
        return lead, tokens

    def chunk(self, doc: RedactedDocument) -> ChunkSet:
        chunks: tuple[Chunk, ...] = ()
        if doc.op == "upsert":
            title = clip_title(self.tokenizer, doc.title)
            chunks = tuple(
                Chunk(chunk_id=chunk_id(doc.doc_id, doc.version, i, part), ordinal=i,
                      text=part, token_count=self.count(passage(title, part)),
                      overlap_chars=lead)
                for i, (part, lead, _) in enumerate(self.pieces(doc.text,
                                                                self.text_budget(title)))
            )
        return ChunkSet(
            doc_id=doc.doc_id, version=doc.version, op=doc.op, title=doc.title,
            source=doc.source, domain=doc.domain, event_time=doc.event_time,
            ingest_time=doc.ingest_time, chunks=chunks, acl=doc.acl,
        )
