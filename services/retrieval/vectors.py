"""Vectors of one shard in FAISS: exact while small, IVF trained in the background past a size.

Ids are the metadata slots of services.retrieval.columns, so a filter is a bitmap selector.
Updates that arrive while an IVF trains are logged and replayed onto the new index under the
lock just before the swap, so the swap loses nothing and searches never see a half-built index.
"""

from __future__ import annotations

import logging
import math
import threading

import faiss
import numpy as np

from services.retrieval.index_config import IndexConfig, Strategy
from services.retrieval.ivf import all_ids, build_ivf

log = logging.getLogger(__name__)


class VectorIndex:
    def __init__(self, dim: int, config: IndexConfig, index: faiss.Index | None = None) -> None:
        self.dim, self.config = dim, config
        self.index = index if index is not None else faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self.trained_size = self.index.ntotal if self.is_ivf else 0
        self._lock = threading.Lock()
        self._pending: list[tuple[np.ndarray, np.ndarray | None]] | None = None
        self._trainer: threading.Thread | None = None

    @property
    def is_ivf(self) -> bool:
        return isinstance(self.index, faiss.IndexIVF)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        with self._lock:
            self.index.add_with_ids(vectors, ids)
            if self._pending is not None:
                self._pending.append((ids, vectors))
        self.maybe_train()

    def remove(self, ids: np.ndarray) -> None:
        with self._lock:
            self.index.remove_ids(ids)
            if self._pending is not None:
                self._pending.append((ids, None))

    def vectors_of(self, ids: np.ndarray) -> np.ndarray:
        """The stored vectors of these ids (each must be in the index)."""
        with self._lock:
            return self.index.reconstruct_batch(ids)

    def serialize(self) -> np.ndarray:
        with self._lock:
            return faiss.serialize_index(self.index)

    @classmethod
    def deserialize(cls, dim: int, config: IndexConfig, data: np.ndarray) -> VectorIndex:
        index = faiss.deserialize_index(data)
        if isinstance(index, faiss.IndexIVF):
            index.set_direct_map_type(faiss.DirectMap.Hashtable)
        if index.d != dim:
            raise ValueError(f"snapshot index has dimension {index.d}, expected {dim}")
        return cls(dim, config, index)

    def maybe_train(self) -> None:
        n, cfg = len(self), self.config
        due = n >= cfg.ivf_threshold and (not self.is_ivf or n >= cfg.retrain_growth
                                          * max(self.trained_size, 1))
        if due and self._trainer is None:
            self._trainer = threading.Thread(target=self._train, name="ivf-train", daemon=True)
            self._trainer.start()

    def wait_trained(self) -> None:
        """Block until a background training (if any) has swapped in: tests and benchmarks."""
        if self._trainer is not None:
            self._trainer.join()

    def _train(self) -> None:
        try:
            with self._lock:
                ids = all_ids(self.index)
                vectors = self.index.reconstruct_batch(ids)
                self._pending = []
            ivf = build_ivf(self.dim, vectors, ids, self.config)
            with self._lock:
                for op_ids, op_vectors in self._pending:
                    if op_vectors is None:
                        ivf.remove_ids(op_ids)
                    else:
                        ivf.add_with_ids(op_vectors, op_ids)
                self.index, self.trained_size, self._pending = ivf, len(ids), None
            log.info("IVF with %d lists swapped in over %d vectors", ivf.nlist, len(ids))
        finally:
            self._pending, self._trainer = None, None

    def search(self, query: np.ndarray, k: int, mask: np.ndarray | None,
               strategy: Strategy = "selector") -> list[tuple[float, int]]:
        """Top k (score, id) by inner product among ids where `mask` is True (all if None)."""
        # One query at a time: an OpenMP fan-out costs more than it saves and spins against
        # the other services on a shared box. The setting is per calling thread, so the
        # trainer thread keeps every core.
        faiss.omp_set_num_threads(1)
        index = self.index  # one reference: a swap mid-search must not mix two indexes
        q = np.ascontiguousarray(query, dtype="float32").reshape(1, -1)
        nprobe = self.config.nprobe
        if mask is None:
            return _at_least(index, q, min(k, index.ntotal), None, nprobe)
        admitted = int(mask.sum())
        want = min(k, admitted)
        if want == 0:
            return []
        # Probe as many lists as it takes to meet about as many admitted vectors as an
        # unfiltered search meets: recall stays that of the unfiltered search.
        share = admitted / max(1, index.ntotal)
        nprobe = math.ceil(nprobe / share)
        if admitted <= self.config.exact_below and isinstance(index, faiss.IndexIVF):
            # Few admitted (a rare filter, a caller who may read little): every list through
            # the bitmap, so exact. The selector is checked before a distance is computed,
            # so this costs a pass over ids plus one inner product per admitted vector.
            nprobe = index.nlist
            strategy = "selector"
        if strategy == "overfetch":
            found = self._overfetch(index, q, mask, want, share, nprobe)
            if len(found) >= want:
                return found
        bitmap = np.packbits(mask, bitorder="little")
        selector = faiss.IDSelectorBitmap(len(bitmap), faiss.swig_ptr(bitmap))
        return _at_least(index, q, want, selector, nprobe)

    def _overfetch(self, index: faiss.Index, q: np.ndarray, mask: np.ndarray, want: int,
                   share: float, nprobe: int) -> list[tuple[float, int]]:
        """Search wider without a selector and drop what the filter refuses; widen on a miss."""
        fetch = math.ceil(want * self.config.overfetch / share)
        while True:
            fetch = min(fetch, index.ntotal)
            found = [(s, i) for s, i in _run(index, q, fetch, None, nprobe)
                     if i < len(mask) and mask[i]][:want]
            if len(found) >= want or fetch >= index.ntotal:
                return found
            fetch *= 4


def _at_least(index: faiss.Index, q: np.ndarray, want: int,
              selector: faiss.IDSelector | None, nprobe: int) -> list[tuple[float, int]]:
    """`want` results: the probed lists first; when they hold fewer than `want` (admitted)
    vectors, every list (exact). Unfiltered too: a coarse or unbalanced IVF's probed lists
    can hold fewer than k vectors while the shard holds k."""
    found = _run(index, q, want, selector, nprobe)
    if len(found) < want and isinstance(index, faiss.IndexIVF):
        found = _run(index, q, want, selector, index.nlist)
    return found


def _run(index: faiss.Index, q: np.ndarray, k: int, selector: faiss.IDSelector | None,
         nprobe: int) -> list[tuple[float, int]]:
    if k <= 0:
        return []
    if isinstance(index, faiss.IndexIVF):
        params: faiss.SearchParameters = faiss.SearchParametersIVF(sel=selector, nprobe=nprobe)
    else:
        params = faiss.SearchParameters(sel=selector)
    scores, ids = index.search(q, k, params=params)
    return [(s, i) for s, i in zip(scores[0].tolist(), ids[0].tolist(), strict=True) if i >= 0]
