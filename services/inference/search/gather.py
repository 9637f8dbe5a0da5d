"""The gather side of a search: shard replies split per query, and the merged top k.

Pure: no Kafka and no asyncio, so the partial-result and merge rules test without a broker.
The requests are built in scatter.py.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from services.inference.search.fusion import Fusion, fuse
from shared.contract.records import SearchHit, SearchReply


@dataclass(frozen=True)
class ShardAnswer:
    """One shard's part of one query's answer."""

    partition: int
    hits: tuple[SearchHit, ...] = ()
    error: str = ""


def split_reply(reply: SearchReply, query_ids: Iterable[str]) -> dict[str, ShardAnswer]:
    """Each asked query's part of a shard's reply. A batch-wide error is every query's;
    a query the shard left out counts as failed there, not as a shard with no matches."""
    if reply.error:
        return {q: ShardAnswer(reply.partition, error=reply.error) for q in query_ids}
    by_id = {r.query_id: r for r in reply.results}
    out = {}
    for q in query_ids:
        r = by_id.get(q)
        out[q] = (ShardAnswer(reply.partition, error="no_result") if r is None
                  else ShardAnswer(reply.partition, r.hits, r.error))
    return out


@dataclass(frozen=True)
class GatherResult:
    hits: tuple[SearchHit, ...]
    answered: tuple[int, ...]  # shards that replied without an error
    missing: tuple[int, ...]  # shards with no reply by the deadline
    errors: Mapping[int, str] = field(default_factory=dict)  # shard -> the reason it gave
    # The in-process shards' generation the hits are exact for (shared/worker/local_search.py):
    # set only when this process's shards answered every shard's part and nothing changed
    # them meanwhile; None otherwise (the broker path, or an update during the search).
    generation: Hashable | None = None

    @property
    def unanswered(self) -> tuple[int, ...]:
        """Shards whose results are not in `hits`: silent or failed."""
        return tuple(sorted({*self.missing, *self.errors}))

    @property
    def partial(self) -> bool:
        return bool(self.unanswered)


def merge_hits(answers: Iterable[ShardAnswer], top_k: int,
               fusion: Fusion | None = None) -> tuple[SearchHit, ...]:
    """The top k across shards by score (fused with `fusion` when the hits carry BM25
    candidates); a chunk seen twice keeps its best score."""
    best: dict[str, SearchHit] = {}
    for answer in answers:
        for hit in answer.hits:
            kept = best.get(hit.chunk_id)
            if kept is None or hit.score > kept.score:
                best[hit.chunk_id] = hit
    if fusion is not None:
        return fuse(list(best.values()), top_k, fusion)
    ranked = sorted(best.values(), key=lambda h: (-h.score, h.chunk_id))
    return tuple(ranked[:top_k])


class Gather:
    """One query's shard answers as they arrive, first answer per shard wins."""

    def __init__(self, partitions: int) -> None:
        self.expected = frozenset(range(partitions))
        self.answers: dict[int, ShardAnswer] = {}

    def add(self, answer: ShardAnswer) -> bool:
        """Record a shard's answer; True once every shard has answered.

        Replies are at-least-once, so a repeat from a shard is ignored, and an answer from
        a shard this query never asked is ignored rather than trusted.
        """
        if answer.partition in self.expected:
            self.answers.setdefault(answer.partition, answer)
        return self.complete

    @property
    def complete(self) -> bool:
        return len(self.answers) == len(self.expected)

    def result(self, top_k: int, fusion: Fusion | None = None) -> GatherResult:
        ok = [a for a in self.answers.values() if not a.error]
        errors = {p: a.error for p, a in sorted(self.answers.items()) if a.error}
        return GatherResult(
            hits=merge_hits(ok, top_k, fusion),
            answered=tuple(sorted(a.partition for a in ok)),
            missing=tuple(sorted(self.expected - self.answers.keys())),
            errors=errors,
        )
