"""BM25 over one shard's chunks: an inverted index that follows the shard's upserts and deletes.

Tokens as bm25s makes them (its scikit-learn pattern, lower case, its English stop words)
with Snowball English stems (PyStemmer), bm25s's recommended setup. Scores as Lucene's
BM25 (bm25s method="lucene"): idf = ln(1 + (N - df + 0.5) / (df + 0.5)) times
tf / (tf + k1 * (1 - b + b * len / mean len)), summed over the question's distinct terms.
Incremental rather than bm25s's static sparse matrix: a shard changes one document at a
time, and rebuilding that matrix costs the whole shard per change. Ids are the shard's
column slots, so the filter mask of the dense search admits the same chunks here.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter

import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

TOKEN = re.compile(r"(?u)\b\w\w+\b")
STOP = frozenset(STOPWORDS_EN)


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def terms(text: str) -> list[str]:
    words = [w for w in TOKEN.findall(text.lower()) if w not in STOP]
    return list(_stemmer().stemWords(words))


class LexicalIndex:
    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.postings: dict[str, dict[int, int]] = {}
        self.lengths = np.zeros(1024, dtype="float64")  # tokens per slot; 0: none
        self.slot_terms: dict[int, tuple[str, ...]] = {}
        self.total_length = 0.0

    def __len__(self) -> int:
        return len(self.slot_terms)

    def add(self, slot: int, text: str) -> None:
        self.remove(slot)
        counts = Counter(terms(text))
        for term, tf in counts.items():
            self.postings.setdefault(term, {})[slot] = tf
        if slot >= len(self.lengths):
            grow = max(slot + 1 - len(self.lengths), len(self.lengths))
            self.lengths = np.concatenate([self.lengths, np.zeros(grow)])
        length = float(sum(counts.values()))
        self.lengths[slot] = length
        self.total_length += length
        self.slot_terms[slot] = tuple(counts)

    def remove(self, slot: int) -> None:
        for term in self.slot_terms.pop(slot, ()):
            posting = self.postings[term]
            del posting[slot]
            if not posting:
                del self.postings[term]
        if slot < len(self.lengths):
            self.total_length -= self.lengths[slot]
            self.lengths[slot] = 0.0

    def scores(self, query: str, size: int, corpus: np.ndarray | None = None) -> np.ndarray:
        """BM25 of every slot below `size` for `query` (0 where no term matches).

        With `corpus` (a boolean mask over slots), only those slots are scored and the
        statistics (N, document frequency, mean length) count only them: the scores are
        those of an index holding nothing else (a caller's readable chunks)."""
        out = np.zeros(size, dtype="float64")
        if size > len(self.lengths):  # trailing slots never indexed here (freed, restored)
            self.lengths = np.concatenate([self.lengths, np.zeros(size - len(self.lengths))])
        if corpus is None:
            n, total = len(self.slot_terms), self.total_length
        else:
            corpus = corpus[:size]  # live slots, every one of them indexed here
            n, total = int(corpus.sum()), float(self.lengths[:size][corpus].sum())
        if not n or total <= 0:
            return out
        norm = self.k1 * (1 - self.b + self.b * self.lengths[:size] / (total / n))
        for term in set(terms(query)):
            posting = self.postings.get(term)
            if not posting:
                continue
            slots = np.fromiter(posting.keys(), dtype="int64", count=len(posting))
            tfs = np.fromiter(posting.values(), dtype="float64", count=len(posting))
            inside = slots < size
            slots, tfs = slots[inside], tfs[inside]
            if corpus is not None:
                readable = corpus[slots]
                slots, tfs = slots[readable], tfs[readable]
            if not len(slots):
                continue
            df = len(posting) if corpus is None else len(slots)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            out[slots] += idf * tfs / (tfs + norm[slots])
        return out

    def search(self, query: str, k: int, size: int,
               mask: np.ndarray | None = None) -> list[tuple[float, int]]:
        """Top k (score, slot) with a positive score among slots where `mask` is True."""
        scores = self.scores(query, size)
        if mask is not None:
            scores = np.where(mask[:size], scores, 0.0)
        hits = np.flatnonzero(scores > 0)
        if len(hits) > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        ranked = sorted(hits.tolist(), key=lambda s: (-scores[s], s))
        return [(float(scores[s]), s) for s in ranked]
