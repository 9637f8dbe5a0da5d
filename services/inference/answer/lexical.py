"""A lexical shortlist of answer sentences: BM25 of the question over the candidates.

The extractive answer ranks sentences by cosine with the question, which needs every
candidate's vector; encoding ~50 sentences on a cold query costs more than the whole
retrieval. BM25 costs microseconds, so it picks the few sentences worth encoding
(scripts/bench_answer measures what the shortlist keeps of the dense ranking's quality).
Pure functions; IDF is taken over the candidates themselves (the only collection at hand).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

K1, B = 1.2, 0.75
_TERM = re.compile(r"[^\W_]+")
# Words a question shares with nearly any sentence; they would only add noise to the scores.
STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is",
    "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "so", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "was",
    "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with",
    "would", "you", "your",
))


def terms(text: str) -> list[str]:
    return [t for t in _TERM.findall(text.casefold()) if t not in STOPWORDS]


def bm25(question: str, sentences: Sequence[str]) -> list[float]:
    """Each sentence's BM25 score for `question`, IDF over `sentences`."""
    docs = [Counter(terms(s)) for s in sentences]
    if not docs:
        return []
    lengths = [sum(d.values()) for d in docs]
    avg = max(sum(lengths) / len(docs), 1.0)
    query = set(terms(question))
    df = Counter(t for d in docs for t in query if t in d)
    idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    scores = []
    for doc, length in zip(docs, lengths, strict=True):
        norm = K1 * (1 - B + B * length / avg)
        scores.append(sum(idf[t] * doc[t] * (K1 + 1) / (doc[t] + norm)
                          for t in idf if t in doc))
    return scores


def shortlist(question: str, sentences: Sequence[str], size: int) -> list[int]:
    """Indices of the `size` sentences with the best BM25 scores, in their original order.

    Ties (sentences sharing no term with the question score 0) go to the earlier sentence:
    candidates come in retrieval order, so the best-ranked chunks fill the list.
    """
    if size <= 0 or len(sentences) <= size:
        return list(range(len(sentences)))
    scores = bm25(question, sentences)
    best = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[:size]
    return sorted(best)
