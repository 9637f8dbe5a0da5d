"""Access inside the shard: a search answers exactly the brute-force oracle's permitted top k.

Random documents with random labels, random upserts, relabels and deletes, random callers
(groups, PUBLIC, user labels, a group no document carries, all-access), filters, top k and
question text; the shard is asked through search.answer, the way the search agent asks it.
Exact index paths must match the oracle chunk for chunk; approximate ones may miss a chunk
(recall < 1) but never return one the caller may not read, and never fewer than k.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval import snapshot
from services.retrieval.columns import EVERYTHING, Filters
from services.retrieval.index import IndexConfig, Shard
from services.retrieval.lexical import LexicalIndex
from services.retrieval.search import answer
from services.retrieval.settings import RetrievalSettings
from services.retrieval.shards import Shards
from shared.contract.access import PUBLIC, Access
from shared.contract.codec import encode
from shared.contract.records import SearchReply, SearchRequest, SearchSpec, encode_vector
from shared.encoder.passage import passage
from tests.unit.retrieval.helpers import DIM, chunk_set, settle, unit

LABELS = ("g0", "g1", "g2", PUBLIC, "user:ann", "user:bob")
GRANTS = (*LABELS, "g9")  # g9: a group no document carries
WORDS = ("d0", "d1", "d2", "d3", "d7", "v1", "v2", "v3", "c0", "c1", "c2")
# name -> (settings, exact): exact paths must equal the oracle, approximate ones may miss.
PATHS: dict[str, tuple[dict, bool]] = {
    "flat selector": ({"ivf_threshold": 10**9, "exact_below": 0}, True),
    "coarse IVF, every list below": ({"ivf_threshold": 1, "nprobe": 1}, True),
    "IVF every list": ({"ivf_threshold": 1, "nprobe": 10**6, "exact_below": 0}, True),
    "coarse IVF selector": ({"ivf_threshold": 1, "nprobe": 1, "exact_below": 0}, False),
    "coarse IVF over-fetch": ({"ivf_threshold": 1, "nprobe": 1, "exact_below": 0,
                               "filter_strategy": "overfetch"}, False),
}


@dataclass
class Oracle:
    """What the shard should hold: each live document's labels, metadata and chunks."""

    docs: dict[str, tuple[int, tuple[str, ...], str, float, list[tuple[str, int, str]]]] = \
        field(default_factory=dict)

    def chunks(self) -> list[tuple[str, np.ndarray, str, tuple[str, ...], str, float]]:
        return [(cid, unit(seed), text, acl, dom, t)
                for _, acl, dom, t, chunks in self.docs.values() for cid, seed, text in chunks]


ops = st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["upsert"] * 4 + ["delete"]),
                         st.frozensets(st.sampled_from(LABELS), max_size=3),
                         st.integers(1, 3), st.sampled_from("ab"), st.integers(1, 3)),
               min_size=1, max_size=30)
callers = st.builds(Access, st.frozensets(st.sampled_from(GRANTS), max_size=4),
                    st.sampled_from([False] * 5 + [True]))
texts = st.none() | st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)


def build(tmp: Path, path: str, history: list) -> tuple[Shards, Oracle]:
    shards = Shards(RetrievalSettings(data_dir=tmp, use_gpu=False, lexical=True,
                                      **PATHS[path][0]))

    async def no_digest(partition: int, offset: int) -> str | None:
        return None
    asyncio.run(shards.assign({0: 0}, no_digest))
    oracle, versions = Oracle(), dict[str, int]()
    for offset, (d, op, labels, nchunks, dom, t) in enumerate(history):
        doc = f"d{d}"
        version = versions[doc] = versions.get(doc, 0) + 1
        seeds = [1000 * offset + i for i in range(nchunks)]  # unique: no ties in scores
        update = chunk_set(doc, version, seeds, op=op, event_time=t, domain=dom,
                           acl=tuple(sorted(labels)))
        shards.apply(0, offset, update)
        shards.applied(0, offset, encode(update))
        if op == "delete":
            oracle.docs.pop(doc, None)
        else:
            oracle.docs[doc] = (version, update.acl, dom, t, [
                (c.chunk_id, s, passage(update.title, c.text))
                for c, s in zip(update.chunks, seeds, strict=True)])
    shard = shards.get("m", 0)
    assert shard is not None
    settle(shard)
    return shards, oracle


def ask(shards: Shards, caller: Access, q: np.ndarray, k: int, since: float | None,
        domain: str | None, text: str | None) -> SearchReply:
    spec = SearchSpec(query_id="q", vector=encode_vector(q), top_k=k, text=text or "",
                      since=since, domain=domain, groups=tuple(sorted(caller.grants)),
                      all_access=caller.all_access)
    return answer(shards, SearchRequest(request_id="r", partition=0, model_id="m", dim=DIM,
                                        deadline=0.0, queries=(spec,)), 0)


@pytest.mark.parametrize("path", sorted(PATHS))
@settings(max_examples=40, deadline=None)
@given(ops, callers, st.none() | st.integers(1, 3), st.none() | st.sampled_from("abz"),
       st.integers(1, 6), texts, st.integers(0, 10_000))
def test_the_shard_answers_the_oracles_permitted_top_k(path, history, caller, since, domain,
                                                       k, text, qseed):
    exact = PATHS[path][1]
    with tempfile.TemporaryDirectory() as tmp:
        shards, oracle = build(Path(tmp), path, history)
    shard = shards.get("m", 0)
    assert shard is not None
    q = unit(qseed + 100_000)
    readable = [c for c in oracle.chunks() if caller.admits(c[3])]
    admitted = {cid: float(v @ q) for cid, v, _, _, dom, t in readable
                if (since is None or t >= since) and (domain is None or dom == domain)}
    reply = ask(shards, caller, q, k, since, domain, text)
    assert not reply.error and not reply.results[0].error
    # The size a caller learns counts only what it may read.
    assert reply.shard_size == len(readable)
    hits = reply.results[0].hits
    assert all(h.chunk_id in admitted for h in hits), "a forbidden or filtered chunk"
    assert all(h.acl == () for h in hits)  # labels never leave the shard
    assert {h.chunk_id: h.score for h in hits} == pytest.approx(
        {h.chunk_id: admitted[h.chunk_id] for h in hits}, abs=1e-5)
    dense = sorted(admitted, key=lambda c: -admitted[c])[:k]
    assert len(hits) >= len(dense)  # never fewer than k readable chunks
    if exact:
        assert set(dense) <= {h.chunk_id for h in hits}
        if not text:
            assert [h.chunk_id for h in hits] == dense
    # The scan path (Filters.admits) and the vectorised mask agree.
    f = Filters(since=since, domain=domain, access=caller)
    assert (shard.columns.scan_mask(f) == shard.columns.mask(f)).all()
    if text:
        # BM25 as an index holding only the caller's readable chunks would score it.
        alone = LexicalIndex()
        for slot, (_, _, words, *_) in enumerate(readable):
            alone.add(slot, words)
        bm25 = dict(zip([c[0] for c in readable],
                        alone.scores(text, len(readable)).tolist(), strict=True))
        assert {h.chunk_id: h.lexical for h in hits} == pytest.approx(
            {h.chunk_id: bm25[h.chunk_id] for h in hits}, abs=1e-9)
        best = sorted((bm25[c] for c in admitted if bm25[c] > 0), reverse=True)[:k]
        assert sorted((h.lexical for h in hits if h.lexical > 0), reverse=True)[:k] == \
            pytest.approx(best, abs=1e-9)


def test_a_new_version_with_other_labels_replaces_them_and_a_delete_clears_them() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("a", 1, [1, 2], acl=("g1",)))
    g1, g2 = Access.of("ann", ["g1"]), Access.of("bob", ["g2"])
    assert len(shard.search(unit(1), 5, Filters(access=g1))) == 2
    shard.apply(chunk_set("a", 2, [1, 2], acl=("g2",)))  # g1 revoked, g2 granted
    assert shard.search(unit(1), 5, Filters(access=g1)) == []
    assert [h.chunk_id for h in shard.search(unit(1), 5, Filters(access=g2))] == [
        "a#v2#0", "a#v2#1"]
    shard.apply(chunk_set("a", 3, [], op="delete"))
    assert shard.columns.labels == {} and shard.search(unit(1), 5, Filters(access=g2)) == []


def test_filters_name_their_caller_or_fail() -> None:
    """No default caller: code that forgets to pass one gets a TypeError, not all access."""
    with pytest.raises(TypeError, match="access"):
        Filters()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="access"):
        Filters(domain="hr")  # type: ignore[call-arg]
    assert Filters(access=EVERYTHING).empty
    assert not Filters(access=Access.of(None, [PUBLIC])).empty


def test_unknown_groups_admit_nothing_and_unlabelled_documents_only_all_access() -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("open", 1, [1], acl=(PUBLIC,)))
    shard.apply(chunk_set("none", 1, [2]))  # no labels: deny by default
    shard.apply(chunk_set("mine", 1, [3], acl=("user:ann",)))
    ids = lambda access: sorted(h.doc_id for h in shard.search(unit(1), 9, Filters(access=access)))  # noqa: E731
    assert ids(Access(frozenset({"nobody"}))) == []
    assert ids(Access.of(None, [])) == ["open"]
    assert ids(Access.of("ann", [])) == ["mine", "open"]
    assert ids(Access.everything()) == ["mine", "none", "open"]


def test_shard_size_counts_what_every_asker_of_a_batch_may_read() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        shards, _ = build(Path(tmp), "flat selector", [
            (0, "upsert", frozenset({"g0"}), 2, "a", 1),
            (1, "upsert", frozenset({"g1"}), 1, "a", 1),
            (2, "upsert", frozenset({"g0", "g1"}), 1, "a", 1)])
    specs = tuple(SearchSpec(query_id=f"q{i}", vector=encode_vector(unit(1)), top_k=3,
                             groups=groups) for i, groups in enumerate([("g0",), ("g1",)]))
    req = SearchRequest(request_id="r", partition=0, model_id="m", dim=DIM, deadline=0.0,
                        queries=specs)
    assert answer(shards, req, 0).shard_size == 1  # only d2 is readable by both
    everyone = req.model_copy(update={"queries": tuple(
        s.model_copy(update={"all_access": True}) for s in specs)})
    assert answer(shards, everyone, 0).shard_size == 4


@pytest.mark.parametrize("config", [IndexConfig(), IndexConfig(ivf_threshold=1, nprobe=1,
                                                               exact_below=0)],
                         ids=["flat", "ivf"])
def test_a_snapshot_keeps_the_labels(tmp_path: Path, config: IndexConfig) -> None:
    shard = Shard("m", DIM, config)
    for n in range(30):
        shard.apply(chunk_set(f"d{n}", 1, [n], acl=(f"g{n % 3}",)))
    shard.apply(chunk_set("d0", 2, [0], acl=("g2",)))
    settle(shard)
    path = snapshot.path_for(tmp_path, 0)
    snapshot.save(shard, path)
    loaded = snapshot.load(path, "m", DIM, config)
    assert loaded is not None
    for group in ("g0", "g1", "g2"):
        f = Filters(access=Access.of(None, [group]))
        assert [h.chunk_id for h in loaded.search(unit(0), 30, f)] == \
            [h.chunk_id for h in shard.search(unit(0), 30, f)]
        assert loaded.columns.permitted(f.access) == shard.columns.permitted(f.access)
    assert loaded.columns.permitted(Access.of(None, ["g0"])) == 9  # d0 moved to g2


def test_a_snapshot_from_before_labels_restores_deny_by_default(tmp_path: Path) -> None:
    shard = Shard("m", DIM)
    shard.apply(chunk_set("old", 1, [1], acl=(PUBLIC,)))
    path = snapshot.path_for(tmp_path, 0)
    snapshot.save(shard, path)
    with np.load(path, allow_pickle=False) as data:
        index, state = data["index"], json.loads(data["state"].tobytes())
    for hit in state["hits"]:  # as the format wrote hits before `acl` existed
        assert hit.pop("acl") == [PUBLIC]
    np.savez(path, index=index, state=np.frombuffer(json.dumps(state).encode(), dtype="uint8"))
    loaded = snapshot.load(path, "m", DIM, IndexConfig())
    assert loaded is not None and len(loaded) == 1
    assert loaded.search(unit(1), 5, Filters(access=Access.of("ann", ["g1"]))) == []
    assert [h.doc_id for h in loaded.search(unit(1), 5, Filters(access=EVERYTHING))] == ["old"]
