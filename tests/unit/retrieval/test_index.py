"""The shard: updates replace, deletes remove, filters are exact against a brute-force oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval.columns import EVERYTHING
from services.retrieval.index import Filters, IndexConfig, Shard
from shared.contract.codec import decode, encode
from shared.contract.records import QueryHits, SearchReply, encode_vector
from shared.errors import InvalidInput, ModelMismatchError
from tests.unit.retrieval.helpers import DIM, EXACT_IVF, chunk_set, settle, unit


def test_update_replaces_every_old_chunk() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("a", 1, [1, 2, 3]))
    shard.apply(chunk_set("a", 2, [4]))
    hits = shard.search(unit(1), 10, Filters(access=EVERYTHING))
    assert [h.chunk_id for h in hits] == ["a#v2#0"] and len(shard) == 1


def test_delete_removes_and_stale_versions_are_ignored() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("a", 2, [1]))
    assert shard.apply(chunk_set("a", 1, [9])) is False
    assert [h.version for h in shard.search(unit(1), 5, Filters(access=EVERYTHING))] == [2]
    shard.apply(chunk_set("a", 3, [], op="delete"))
    assert shard.search(unit(1), 5, Filters(access=EVERYTHING)) == [] and len(shard) == 0


def test_freed_slots_are_reused_so_ids_stay_dense() -> None:
    shard = Shard("m", DIM)
    for v in range(1, 20):
        shard.apply(chunk_set("a", v, [v, v + 100, v + 200]))
    assert shard.columns.size == 3 and len(shard.vectors) == 3
    assert {h.chunk_id for h in shard.search(unit(0), 5, Filters(access=EVERYTHING))} == {
        "a#v19#0", "a#v19#1", "a#v19#2"}


def test_scores_are_inner_products_in_descending_order() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("a", 1, [1, 2, 3, 4]))
    q = unit(3)
    hits = shard.search(q, 4, Filters(access=EVERYTHING))
    assert hits[0].chunk_id == "a#v1#2" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    expected = sorted((float(unit(s) @ q) for s in [1, 2, 3, 4]), reverse=True)
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)


def test_refuses_another_model_or_dimension() -> None:
    with pytest.raises(ModelMismatchError):
        Shard("m", DIM).apply(chunk_set("a", 1, [1], model="other"))
    with pytest.raises(ModelMismatchError):  # declares DIM but carries 4-dim vectors
        Shard("m", DIM).apply(chunk_set("a", 1, [1], dim=4))


def test_refuses_vectors_that_are_not_finite_or_not_base64() -> None:
    good = chunk_set("a", 1, [1])
    for vector in (encode_vector(np.full(DIM, np.nan, dtype="float32")), "not base64!"):
        chunk = good.chunks[0].model_copy(update={"vector": vector})
        with pytest.raises(InvalidInput) as err:
            Shard("m", DIM).apply(good.model_copy(update={"chunks": (chunk,)}))
        assert (err.value.reason, err.value.field) == ("invalid_vector", "chunks.vector")


def test_selective_filter_still_returns_top_k_on_a_coarse_ivf() -> None:
    # nprobe 1 of many lists: the admitted chunks are mostly in lists not probed.
    shard = Shard("m", DIM, IndexConfig(ivf_threshold=1, nprobe=1))
    for n in range(300):
        shard.apply(chunk_set(f"d{n}", 1, [n], domain="rare" if n % 50 == 0 else "common"))
    settle(shard)
    assert shard.vectors.is_ivf and shard.vectors.index.nlist > 4
    q = unit(7)
    hits = shard.search(q, 5, Filters(access=EVERYTHING, domain="rare"))
    expected = sorted((float(unit(n) @ q) for n in range(0, 300, 50)), reverse=True)[:5]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)
    assert {h.domain for h in hits} == {"rare"}


docs = st.lists(st.tuples(st.integers(0, 200), st.sampled_from(["ops", "pay", "hr"]),
                          st.sampled_from(["git", "wiki"]), st.integers(1, 4)),
                min_size=1, max_size=25)
KINDS = {"flat": IndexConfig(), "ivf": EXACT_IVF}


@pytest.mark.parametrize("strategy", ["selector", "overfetch"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=25, deadline=None)
@given(docs, st.integers(0, 200) | st.none(), st.integers(0, 200) | st.none(),
       st.sampled_from(["ops", "pay", "hr", "none"]) | st.none(),
       st.sampled_from(["git", "wiki"]) | st.none(), st.integers(1, 30), st.integers(0, 10_000),
       st.sets(st.integers(0, 24), max_size=5))
def test_filtered_search_matches_brute_force(kind, strategy, spec, since, until, domain, source,
                                             k, qseed, deleted):
    shard = Shard("m", DIM, KINDS[kind], strategy)
    vectors: dict[str, tuple[np.ndarray, float, str, str]] = {}
    for n, (t, dom, src, nchunks) in enumerate(spec):
        seeds = [n * 10 + i for i in range(nchunks)]
        shard.apply(chunk_set(f"doc{n}", 1, seeds, event_time=t, domain=dom, source=src))
        for i, s in enumerate(seeds):
            vectors[f"doc{n}#v1#{i}"] = (unit(s), t, dom, src)
    for n in deleted & set(range(len(spec))):
        shard.apply(chunk_set(f"doc{n}", 2, [], op="delete"))
        vectors = {c: v for c, v in vectors.items() if not c.startswith(f"doc{n}#")}
    settle(shard)
    assert shard.vectors.is_ivf == (kind == "ivf")
    f = Filters(access=EVERYTHING, since=since, until=until, domain=domain, source=source)
    q = unit(qseed + 100_000)
    admitted = {cid: float(v @ q) for cid, (v, t, dom, src) in vectors.items()
                if (since is None or t >= since) and (until is None or t <= until)
                and (domain is None or dom == domain) and (source is None or src == source)}
    expected = sorted(admitted.values(), reverse=True)[:k]
    hits = shard.search(q, k, f)
    assert all(h.chunk_id in admitted for h in hits)
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)


def test_a_hit_that_cannot_travel_in_a_reply_is_left_out_not_the_whole_reply() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("fine", 1, [1]))
    shard.apply(chunk_set("nan-time", 1, [2], event_time=float("nan")))
    bad = chunk_set("bad-text", 1, [3])
    shard.apply(bad.model_copy(update={"title": "t\ud800"}))
    hits = shard.search(unit(1), 10, Filters(access=EVERYTHING))
    assert [h.doc_id for h in hits] == ["fine"] and shard.dropped == 2
    reply = SearchReply(request_id="r", partition=0,
                        results=(QueryHits(query_id="q", hits=tuple(hits)),))
    assert decode(SearchReply, encode(reply)).results[0].hits == tuple(hits)
