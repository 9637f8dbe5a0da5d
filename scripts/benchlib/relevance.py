"""Ranking quality against relevance judgements: nDCG@k and Recall@k as BEIR computes them.

The definitions are pytrec_eval's (trec_eval `ndcg_cut` and `recall`), which BEIR reports:
gain is the judged grade itself (not 2^grade - 1), the discount log2(rank + 1), the ideal
ranking is every judged document by grade, cut at k; a document counts as relevant for
recall when its grade is at least 1. Unlike pytrec_eval, a query in the judgements that got
no ranking at all scores 0 rather than being left out of the mean (a mesh that loses a
query must not look better for it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]  # query id -> {doc id: grade}
Run = Mapping[str, Sequence[str]]  # query id -> doc ids, best first


def ndcg_at(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    dcg = sum(judged.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, g in judged.items() if g >= 1}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def evaluate(qrels: Qrels, run: Run, ks: Sequence[int] = (10, 100)) -> dict[str, float]:
    """Means over the judged queries that have a relevant document: NDCG@k and Recall@k."""
    queries = [q for q, judged in qrels.items() if any(g > 0 for g in judged.values())]
    out: dict[str, float] = {}
    for k in ks:
        out[f"NDCG@{k}"] = _mean(ndcg_at(run.get(q, ()), qrels[q], k) for q in queries)
        out[f"Recall@{k}"] = _mean(recall_at(run.get(q, ()), qrels[q], k) for q in queries)
    return out


def _mean(values: Iterable[float]) -> float:
    xs = list(values)
    return sum(xs) / len(xs) if xs else 0.0


def documents_by_best_chunk(hits: Iterable[tuple[str, float]]) -> list[str]:
    """Doc ids ranked by their best chunk's score (ties by doc id): a document is as
    relevant as its most relevant part, however many weaker chunks it also has."""
    best: dict[str, float] = {}
    for doc_id, score in hits:
        if score > best.get(doc_id, -math.inf):
            best[doc_id] = score
    return sorted(best, key=lambda d: (-best[d], d))


def documents_in_order(doc_ids: Iterable[str]) -> list[str]:
    """Doc ids in the order a server ranked their chunks, each once (its first chunk): for
    answers a later stage reordered (a reranker), whose `score` is still the search's."""
    return list(dict.fromkeys(doc_ids))
