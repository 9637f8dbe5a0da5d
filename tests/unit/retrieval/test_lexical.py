"""The shard's BM25 index: bm25s's Lucene scores, incremental updates, hybrid shard search."""

from __future__ import annotations

from pathlib import Path

import bm25s
import numpy as np
import pytest

from services.retrieval import snapshot
from services.retrieval.columns import EVERYTHING
from services.retrieval.index import Filters, IndexConfig, Shard
from services.retrieval.lexical import LexicalIndex, terms
from shared.contract.records import EmbeddedChunk, EmbeddedChunkSet, encode_vector
from tests.unit.retrieval.helpers import DIM, EXACT_IVF, settle, unit

CORPUS = ["The payment gateway certificate expired at midnight.",
          "Certificates must be rotated: an expired certificate stops payments.",
          "Disk full on the billing replica; the nightly cron crashed.",
          "Kafka consumer lag grew while the billing service restarted.",
          "Nothing to see here."]


def test_scores_equal_bm25s_lucene_on_the_same_tokens() -> None:
    index = LexicalIndex(k1=1.2, b=0.75)
    for slot, text in enumerate(CORPUS):
        index.add(slot, text)
    reference = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    reference.index([terms(t) for t in CORPUS], show_progress=False)
    for query in ("expired certificates", "billing cron crashed", "kafka lag payments"):
        ids = [reference.vocab_dict[t] for t in set(terms(query)) if t in reference.vocab_dict]
        want = reference.get_scores(ids) if ids else np.zeros(len(CORPUS))
        assert index.scores(query, len(CORPUS)) == pytest.approx(want, rel=1e-5)
    assert terms("The certificates EXPIRED") == ["certif", "expir"]  # stop word, stems


def test_updates_and_removals_leave_what_a_fresh_index_of_the_final_texts_holds() -> None:
    index = LexicalIndex()
    for slot, text in enumerate(CORPUS):
        index.add(slot, text)
    index.add(1, "Rotated keys for the auth service.")  # slot reused with new words
    index.remove(2)
    fresh = LexicalIndex()
    final = {0: CORPUS[0], 1: "Rotated keys for the auth service.", 3: CORPUS[3], 4: CORPUS[4]}
    for slot, text in final.items():
        fresh.add(slot, text)
    for query in ("certificate expired", "billing", "auth keys rotated"):
        assert index.scores(query, 5) == pytest.approx(fresh.scores(query, 5))
    assert [s for _, s in index.search("billing crashed", 5, 5)] == [3]  # 2 is gone
    assert index.search("billing", 5, 5, mask=np.array([1, 1, 1, 0, 1], bool)) == []


def doc(name: str, text: str, seed: int, domain: str = "d", version: int = 1,
        op: str = "upsert") -> EmbeddedChunkSet:
    chunks = (EmbeddedChunk(chunk_id=f"{name}#v{version}#0", ordinal=0, text=text,
                            token_count=3, vector=encode_vector(unit(seed))),)
    return EmbeddedChunkSet(doc_id=name, version=version, op=op, title=f"{name} notes",  # type: ignore[arg-type]
                            source="s", domain=domain, event_time=1, ingest_time=0,
                            model_id="m", dim=DIM, chunks=chunks if op == "upsert" else ())


def hybrid_shard(config: IndexConfig) -> Shard:
    shard = Shard("m", DIM, config, lexical=True)
    for n in range(40):
        shard.apply(doc(f"d{n}", f"routine entry number {n}", n, "even" if n % 2 else "odd"))
    shard.apply(doc("needle", "the zeppelin certificate expired", 999, "even"))
    settle(shard)
    return shard


@pytest.mark.parametrize("config", [IndexConfig(), EXACT_IVF], ids=["flat", "ivf"])
def test_a_hybrid_search_adds_the_bm25_top_k_with_both_scores(config: IndexConfig) -> None:
    shard = hybrid_shard(config)
    q = unit(5)
    dense = shard.search(q, 3, Filters(access=EVERYTHING))
    assert "needle" not in [h.doc_id for h in dense] and all(h.lexical == 0 for h in dense)
    hybrid = {h.doc_id: h for h in shard.search(q, 3, Filters(access=EVERYTHING), "zeppelin")}
    assert set(hybrid) == {h.doc_id for h in dense} | {"needle"}
    assert hybrid["needle"].lexical > 0
    assert hybrid["needle"].score == pytest.approx(float(unit(999) @ q), abs=1e-5)
    odd = Filters(access=EVERYTHING, domain="odd")
    assert "needle" not in {h.doc_id for h in shard.search(q, 3, odd, "zeppelin")}
    shard.apply(doc("needle", "", 0, version=2, op="delete"))
    everything = Filters(access=EVERYTHING)
    assert "needle" not in {h.doc_id for h in shard.search(q, 3, everything, "zeppelin")}
    # The title is indexed too.
    assert "d7" in {h.doc_id for h in shard.search(unit(1), 1, everything, "d7 notes")}


def test_a_loaded_snapshot_rebuilds_the_lexical_index(tmp_path: Path) -> None:
    shard = hybrid_shard(IndexConfig())
    shard.apply(doc("d3", "now about a zeppelin too", 3, version=2))
    path = tmp_path / "shard.npz"
    snapshot.save(shard, path)
    loaded = snapshot.load(path, "m", DIM, IndexConfig(), lexical=True)
    assert loaded is not None and loaded.lexical is not None
    for text in ("zeppelin", "routine entry 12", "certificate"):
        got = [(h.chunk_id, round(h.score, 5), round(h.lexical, 5))
               for h in loaded.search(unit(2), 5, Filters(access=EVERYTHING), text)]
        assert got == [(h.chunk_id, round(h.score, 5), round(h.lexical, 5))
                       for h in shard.search(unit(2), 5, Filters(access=EVERYTHING), text)]
    assert len(loaded.lexical) == len(shard.lexical or ())


def test_a_caller_mask_longer_than_the_indexed_slots_scores_only_its_corpus() -> None:
    # A restored shard can have free slots past the last one this index ever saw.
    index = LexicalIndex()
    index.add(0, "payments outage in europe")
    index.add(1, "payments outage")
    corpus = np.zeros(3000, dtype=bool)
    corpus[1] = True
    scores = index.scores("payments", 3000, corpus)
    alone = LexicalIndex()
    alone.add(1, "payments outage")
    assert scores[0] == 0.0 and scores[1] == alone.scores("payments", 2)[1] > 0
