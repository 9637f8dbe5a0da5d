"""Exact-to-IVF swap: trained in the background, nothing lost, recall exact at nprobe = nlist."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from services.retrieval import vectors as vectors_module
from services.retrieval.columns import EVERYTHING, Columns, Filters
from services.retrieval.ivf import build_ivf, gpu_count
from services.retrieval.vectors import IndexConfig, VectorIndex
from shared.contract.records import SearchHit


def clustered(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    x = centres[rng.integers(0, 20, n)] + 0.3 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype("float32")


def test_updates_during_training_are_applied_before_the_swap(monkeypatch) -> None:
    x = clustered(400)
    index = VectorIndex(16, IndexConfig(ivf_threshold=300, nprobe=1000))
    index.add(np.arange(200), x[:200])
    started, release = threading.Event(), threading.Event()
    real_build = vectors_module.build_ivf

    def slow_build(*args):  # hold the trainer until the test has made its updates
        started.set()
        release.wait(10)
        return real_build(*args)

    monkeypatch.setattr(vectors_module, "build_ivf", slow_build)
    index.add(np.arange(200, 300), x[200:300])  # crosses the threshold: training starts
    assert started.wait(10)
    index.add(np.arange(300, 400), x[300:400])  # while training
    index.remove(np.arange(0, 50))
    assert not index.is_ivf
    release.set()
    index.wait_trained()
    assert index.is_ivf and index.trained_size == 300 and len(index) == 350
    for q in (0, 10, 250, 399):
        found = dict((i, s) for s, i in index.search(x[q], 400, None))
        assert set(found) == set(range(50, 400))  # removes gone, late adds present
        if q >= 50:
            assert found[q] == pytest.approx(1.0, abs=1e-5)  # its own vector, exactly


def test_ivf_at_full_nprobe_is_exact_and_coarse_nprobe_still_recalls_clusters() -> None:
    x = clustered(3000, seed=1)
    ids = np.arange(3000)
    exact = VectorIndex(16, IndexConfig(ivf_threshold=10**9))
    exact.add(ids, x)
    ivf = build_ivf(16, x, ids, IndexConfig(nprobe=10**6))
    approx = VectorIndex(16, IndexConfig(nprobe=4), build_ivf(16, x, ids, IndexConfig()))
    full = VectorIndex(16, IndexConfig(nprobe=10**6), ivf)
    recall = []
    for q in clustered(50, seed=2):
        truth = [i for _, i in exact.search(q, 10, None)]
        assert [i for _, i in full.search(q, 10, None)] == truth
        recall.append(len(set(truth) & {i for _, i in approx.search(q, 10, None)}) / 10)
    assert np.mean(recall) >= 0.5  # 4 of ~54 lists: approximate, but not noise


def test_gpu_training_falls_back_cleanly_without_a_gpu() -> None:
    assert gpu_count() == 0  # this machine: faiss-cpu, no GPU
    x = clustered(500)
    ivf = build_ivf(16, x, np.arange(500), IndexConfig(use_gpu=True))
    assert ivf.is_trained and ivf.ntotal == 500


def test_vectorised_mask_equals_the_python_scan() -> None:
    rng = np.random.default_rng(3)
    cols = Columns(capacity=4)  # forces growth
    for n in range(3000):
        cols.add(SearchHit(chunk_id=f"c{n}", doc_id="d", version=1, score=0,
                           event_time=float(rng.integers(0, 1000)), text="t",
                           domain=str(rng.choice(["a", "b", "c"])),
                           source=str(rng.choice(["x", "y"]))))
    for slot in rng.choice(3000, 500, replace=False):
        cols.remove(int(slot))
    for narrowing in ({"since": 100, "until": 500}, {"domain": "b", "source": "y"},
                      {"domain": "missing"}, {"until": 10, "source": "x"}, {}):
        f = Filters(access=EVERYTHING, **narrowing)
        assert (cols.mask(f) == cols.scan_mask(f)).all()
    assert len(cols) == 2500 and cols.mask(Filters(access=EVERYTHING)).sum() == 2500


def test_an_unfiltered_search_on_a_coarse_ivf_still_returns_k() -> None:
    """nprobe 1 over clusters of a few vectors each: the probed list can hold fewer than k,
    and the search widens to every list, as a filtered one does (hypothesis found this in
    tests/unit/retrieval/test_access.py: 1 hit of 2 for an all-access caller)."""
    x = clustered(200, seed=3)
    ids = np.arange(200)
    coarse = VectorIndex(16, IndexConfig(nprobe=1), build_ivf(16, x, ids, IndexConfig()))
    exact = VectorIndex(16, IndexConfig(ivf_threshold=10**9))
    exact.add(ids, x)
    assert coarse.is_ivf
    for q in range(0, 200, 7):
        for k in (1, 10, 50, 200):
            found = coarse.search(x[q], k, None)
            assert len(found) == k
            assert found[0][1] == q  # its own vector first
            if k == 200:  # every vector: the same set as the exact index
                assert {i for _, i in found} == {i for _, i in exact.search(x[q], k, None)}
