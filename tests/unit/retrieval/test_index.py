"""The FAISS shard: updates replace, deletes remove, filters are exact against an oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval.index import Filters, Shard, faiss_id
from shared.errors import ModelMismatchError
from shared.records import EmbeddedChunk, EmbeddedChunkSet, encode_vector

DIM = 8


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype("float32")
    return v / np.linalg.norm(v)


def chunk_set(doc: str, version: int, seeds: list[int], *, op: str = "upsert",
              event_time: float = 100.0, domain: str = "d", source: str = "s",
              model: str = "m") -> EmbeddedChunkSet:
    chunks = tuple(EmbeddedChunk(chunk_id=f"{doc}#v{version}#{i}", ordinal=i,
                                 text=f"{doc} v{version} c{i}", token_count=3,
                                 vector=encode_vector(unit(s))) for i, s in enumerate(seeds))
    return EmbeddedChunkSet(doc_id=doc, version=version, op=op, source=source, domain=domain,  # type: ignore[arg-type]
                            event_time=event_time, ingest_time=0, model_id=model, dim=DIM,
                            chunks=chunks if op == "upsert" else ())


def test_update_replaces_every_old_chunk() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("a", 1, [1, 2, 3]))
    shard.apply(chunk_set("a", 2, [4]))
    hits = shard.search(unit(1), 10, Filters())
    assert [h.chunk_id for h in hits] == ["a#v2#0"] and len(shard) == 1


def test_delete_removes_and_stale_versions_are_ignored() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("a", 2, [1]))
    assert shard.apply(chunk_set("a", 1, [9])) is False
    assert [h.version for h in shard.search(unit(1), 5, Filters())] == [2]
    shard.apply(chunk_set("a", 3, [], op="delete"))
    assert shard.search(unit(1), 5, Filters()) == [] and len(shard) == 0


def test_scores_are_inner_products_in_descending_order() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("a", 1, [1, 2, 3, 4]))
    q = unit(3)
    hits = shard.search(q, 4, Filters())
    assert hits[0].chunk_id == "a#v1#2" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    expected = sorted((float(unit(s) @ q) for s in [1, 2, 3, 4]), reverse=True)
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)


def test_refuses_another_model_or_dimension() -> None:
    with pytest.raises(ModelMismatchError):
        Shard("m", DIM).apply(chunk_set("a", 1, [1], model="other"))


def test_faiss_ids_are_stable_and_non_negative() -> None:
    assert faiss_id("x#v1#0") == faiss_id("x#v1#0") >= 0
    assert faiss_id("x#v1#0") != faiss_id("x#v1#1")


docs = st.lists(st.tuples(st.integers(0, 200), st.sampled_from(["ops", "pay", "hr"]),
                          st.sampled_from(["git", "wiki"]), st.integers(1, 4)),
                min_size=1, max_size=25)


@settings(max_examples=50, deadline=None)
@given(docs, st.integers(0, 200) | st.none(), st.integers(0, 200) | st.none(),
       st.sampled_from(["ops", "pay", "hr"]) | st.none(), st.sampled_from(["git", "wiki"]) |
       st.none(), st.integers(1, 30), st.integers(0, 10_000))
def test_filtered_search_matches_brute_force(spec, since, until, domain, source, k, qseed):
    shard = Shard("m", DIM)
    vectors: dict[str, tuple[np.ndarray, float, str, str]] = {}
    for n, (t, dom, src, nchunks) in enumerate(spec):
        seeds = [n * 10 + i for i in range(nchunks)]
        shard.apply(chunk_set(f"doc{n}", 1, seeds, event_time=t, domain=dom, source=src))
        for i, s in enumerate(seeds):
            vectors[f"doc{n}#v1#{i}"] = (unit(s), t, dom, src)
    f = Filters(since=since, until=until, domain=domain, source=source)
    q = unit(qseed + 100_000)
    admitted = {cid: float(v @ q) for cid, (v, t, dom, src) in vectors.items()
                if (since is None or t >= since) and (until is None or t <= until)
                and (domain is None or dom == domain) and (source is None or src == source)}
    expected = sorted(admitted.values(), reverse=True)[:k]
    hits = shard.search(q, k, f)
    assert all(h.chunk_id in admitted for h in hits)
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)
