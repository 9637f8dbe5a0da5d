"""The BM25 shortlist of answer sentences: scores, order, size, and what the Extractor encodes."""

from __future__ import annotations

import asyncio

from services.inference.answer import lexical
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch, WordEncoder, hit
from tests.unit.inference.serving import serving, stub

SENTENCES = [
    "The team ordered lunch at noon.",                    # nothing in common
    "The broker disk filled up overnight.",               # disk, broker
    "Rotating the broker logs freed the disk.",           # disk, broker, freed
    "The broker restarted twice.",                        # broker only (common: low IDF)
]


def test_terms_drop_stopwords_and_case() -> None:
    assert lexical.terms("What freed THE disk, and why?") == ["freed", "disk"]


def test_rarer_shared_terms_score_higher() -> None:
    scores = lexical.bm25("what freed the broker disk?", SENTENCES)
    assert scores[0] == 0.0
    assert scores[2] > scores[1] > scores[3] > 0.0  # freed is rarest, broker commonest


def test_shortlist_keeps_the_best_in_original_order() -> None:
    assert lexical.shortlist("what freed the broker disk?", SENTENCES, 2) == [1, 2]
    # Ties at zero go to the earlier sentence (retrieval order).
    assert lexical.shortlist("pizza", SENTENCES, 2) == [0, 1]


def test_shortlist_off_or_larger_than_the_candidates_keeps_all() -> None:
    assert lexical.shortlist("disk", SENTENCES, 0) == [0, 1, 2, 3]
    assert lexical.shortlist("disk", SENTENCES, 9) == [0, 1, 2, 3]
    assert lexical.bm25("disk", []) == []


def test_an_answer_encodes_only_the_shortlist_and_still_cites_its_chunk() -> None:
    chunks = {0: [hit("c-lunch", 0.9, " ".join(f"Lunch item number {i} was pizza again."
                                               for i in range(10)))],
              1: [hit("c-fix", 0.8, "Rotating the broker logs freed the disk space.")]}
    encoder = WordEncoder()

    async def go() -> pb.QueryResponse:
        async with serving(FakeSearch(chunks), lambda: encoder, answer_shortlist=3,
                           sentence_cache_size=0) as (_, channel):
            encoder.calls.clear()
            return await stub(channel).Query(pb.QueryRequest(question="What freed the disk?"))

    reply = asyncio.run(go())
    encoded = [t for call in encoder.calls for t in call if t != "What freed the disk?"]
    assert len(encoded) == 3  # of 11 candidate sentences
    assert "Rotating the broker logs freed the disk space." in encoded
    cited = {c.chunk_id: n for n, c in enumerate(reply.citations, start=1)}
    assert reply.answer.startswith(f"Rotating the broker logs freed the disk space. "
                                   f"[{cited['c-fix']}]")
