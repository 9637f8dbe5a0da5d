"""Building the IVF index that replaces a shard's exact one: k-means on a GPU when there is one."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import faiss
import numpy as np

if TYPE_CHECKING:
    from services.retrieval.index_config import IndexConfig

log = logging.getLogger(__name__)


def gpu_count() -> int:
    """GPUs faiss can use: 0 with the faiss-cpu build (no get_num_gpus GPU support)."""
    try:
        return int(faiss.get_num_gpus())
    except AttributeError:
        return 0


def all_ids(index: faiss.Index) -> np.ndarray:
    """Every id an exact (IndexIDMap2) or IVF index holds."""
    if isinstance(index, faiss.IndexIVF):
        lists = index.invlists
        parts = [faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
                 for i in range(index.nlist) if lists.list_size(i)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype="int64")
    return faiss.vector_to_array(index.id_map).astype("int64")


def build_ivf(dim: int, vectors: np.ndarray, ids: np.ndarray,
              config: IndexConfig) -> faiss.IndexIVFFlat:
    nlist = max(1, int(config.nlist_factor * math.sqrt(len(ids))))
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    ivf.cp.niter = 10  # recall is set by nprobe; more k-means iterations buy little
    if config.use_gpu and gpu_count() > 0:
        try:  # k-means on the GPU; the lists stay on the CPU (selectors, remove_ids)
            ivf.clustering_index = faiss.index_cpu_to_all_gpus(faiss.IndexFlatIP(dim))
        except (AttributeError, RuntimeError) as exc:
            log.warning("GPU k-means unavailable, training on the CPU: %s", exc)
    sample = vectors[np.random.default_rng(0).permutation(len(ids))[:nlist * 64]]
    ivf.train(sample)
    ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # remove and reconstruct by id
    ivf.add_with_ids(vectors, ids)
    return ivf
