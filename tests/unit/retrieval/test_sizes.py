"""A search reply over the record limit is answered `reply_too_large`, never sent oversized
(the producer would refuse it and stop the worker on every replay of the request)."""

from __future__ import annotations

from services.retrieval.search import reply_bytes
from shared.contract import sizes
from shared.contract.codec import decode
from shared.contract.records import QueryHits, SearchHit, SearchReply

LIMIT = sizes.MIN_RECORD_BYTES


def reply(hits: int) -> SearchReply:
    hit = SearchHit(chunk_id="c", doc_id="d", version=1, score=0.5, event_time=1.0,
                    text="t" * 1000, domain="x", source="s")
    return SearchReply(request_id="r1", partition=3, shard_size=9,
                       results=(QueryHits(query_id="q", hits=(hit,) * hits),))


def test_a_reply_within_the_limit_is_sent_whole_and_one_over_it_says_why() -> None:
    small = decode(SearchReply, reply_bytes(reply(10), b"r1", LIMIT))
    large = decode(SearchReply, reply_bytes(reply(100), b"r1", LIMIT))
    assert small == reply(10)
    assert (large.error, large.partition, large.shard_size, large.results) == (
        "reply_too_large", 3, 9, ())
