"""The extractive answer step: shortlist the retrieved chunks' sentences by BM25, encode
the shortlist (through the query encoder's batcher, cached), quote the ones closest to the
question, cut by the caller's limits.

The rules are pure, in extractive.py and lexical.py; this module only feeds them.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from services.inference.answer import extractive, lexical
from services.inference.answer.result import Answer
from services.inference.answer.vector_cache import VectorCache, scoped
from services.inference.cache.key import scope_of
from services.inference.query import QueryParams
from services.inference.telemetry.metrics import InferenceMetrics
from shared.contract.records import SearchHit

Encode = Callable[[Sequence[str]], Awaitable[np.ndarray]]


class Extractor:
    def __init__(self, encode: Encode, sentences: int, cache_size: int,
                 metrics: InferenceMetrics, shortlist: int = 0,
                 cache_ttl_s: float | None = None) -> None:
        self._encode, self.sentences, self.metrics = encode, sentences, metrics
        self.shortlist = shortlist  # sentences encoded per answer; 0: every candidate
        # Its keys are document sentences: none outlives the text retention (cache_ttl_s).
        self.cache = VectorCache(cache_size, cache_ttl_s)

    async def answer(self, params: QueryParams, vector: np.ndarray,
                     hits: Sequence[SearchHit]) -> Answer:
        started = time.perf_counter()
        texts = [hit.text for hit in hits]
        candidates = extractive.candidate_sentences(texts)
        keep = lexical.shortlist(params.question, [c.text for c in candidates], self.shortlist)
        candidates = [candidates[i] for i in keep]  # still in citation order
        vectors = await self._sentence_vectors(scope_of(params.access),
                                               [c.text for c in candidates])
        picked = extractive.select_sentences(vector, vectors, self.sentences,
                                             [c.citation for c in candidates])
        pieces = extractive.answer_pieces([candidates[i] for i in picked])
        kept, reason = extractive.apply_limits(pieces, params.stop, params.max_new_tokens)
        return Answer(tuple(kept), reason, extractive.word_count([params.question, *texts]),
                      extractive.word_count(kept), (time.perf_counter() - started) * 1000)

    async def _sentence_vectors(self, scope: str, sentences: list[str]) -> np.ndarray:
        """Vectors of `sentences`, encoding only those the cache holds for `scope`: one
        caller's answers never make another's faster (answer_ms would tell it which chunks
        the other was answered from)."""
        keys = [scoped(scope, s) for s in sentences]
        text_of = dict(zip(keys, sentences, strict=True))
        found, missing = self.cache.lookup(keys)
        fresh = await self._encode([text_of[k] for k in missing])
        self.cache.store(missing, fresh)
        self.metrics.cache.labels(result="hit").inc(len(sentences) - len(missing))
        self.metrics.cache.labels(result="miss").inc(len(missing))
        return self.cache.fill(keys, found, missing, fresh)
