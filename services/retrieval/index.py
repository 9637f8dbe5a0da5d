"""A FAISS shard with id mapping: upserts and deletes by document, filtered top-k search."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import faiss
import numpy as np

from shared.errors import ModelMismatchError
from shared.records import EmbeddedChunkSet, SearchHit


@dataclass(frozen=True)
class Filters:
    since: float | None = None
    until: float | None = None
    domain: str | None = None
    source: str | None = None

    def admits(self, hit: SearchHit) -> bool:
        return ((self.since is None or hit.event_time >= self.since)
                and (self.until is None or hit.event_time <= self.until)
                and (self.domain is None or hit.domain == self.domain)
                and (self.source is None or hit.source == self.source))

    @property
    def empty(self) -> bool:
        return self == Filters()


def faiss_id(chunk_id: str) -> int:
    """A stable non-negative int64 for a chunk id."""
    return int.from_bytes(hashlib.blake2b(chunk_id.encode(), digest_size=8).digest(),
                          "big") & 0x7FFF_FFFF_FFFF_FFFF


def _flat_index(dim: int, use_gpu: bool) -> faiss.Index:
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    if use_gpu and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    return index


class Shard:
    """The chunks of one partition: vectors in FAISS, metadata and text beside them."""

    def __init__(self, model_id: str, dim: int, use_gpu: bool = False) -> None:
        self.model_id, self.dim = model_id, dim
        self.index = _flat_index(dim, use_gpu)
        self.meta: dict[int, SearchHit] = {}
        self.doc_ids: dict[str, list[int]] = {}
        self.doc_version: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.meta)

    def apply(self, update: EmbeddedChunkSet) -> bool:
        """Replace a document's chunks with this version's (none for a delete).

        Returns False for a stale version (an older one replayed after a newer).
        """
        if update.op == "upsert" and (update.model_id != self.model_id or update.dim != self.dim):
            msg = f"{update.model_id}/{update.dim} != index {self.model_id}/{self.dim}"
            raise ModelMismatchError(msg)
        if update.version < self.doc_version.get(update.doc_id, 0):
            return False
        self._remove_doc(update.doc_id)
        self.doc_version[update.doc_id] = update.version
        if update.op == "delete" or not update.chunks:
            return True
        ids = np.array([faiss_id(c.chunk_id) for c in update.chunks], dtype="int64")
        vectors = np.stack([c.array() for c in update.chunks]).astype("float32")
        self.index.add_with_ids(vectors, ids)
        for fid, c in zip(ids.tolist(), update.chunks, strict=True):
            self.meta[fid] = SearchHit(
                chunk_id=c.chunk_id, doc_id=update.doc_id, version=update.version, score=0.0,
                event_time=update.event_time, text=c.text, title=update.title,
                domain=update.domain, source=update.source)
        self.doc_ids[update.doc_id] = ids.tolist()
        return True

    def _remove_doc(self, doc_id: str) -> None:
        old = self.doc_ids.pop(doc_id, [])
        if old:
            self.index.remove_ids(np.array(old, dtype="int64"))
            for fid in old:
                self.meta.pop(fid, None)

    def search(self, vector: np.ndarray, top_k: int, filters: Filters) -> list[SearchHit]:
        if not self.meta:
            return []
        params = None
        if not filters.empty:
            allowed = [fid for fid, hit in self.meta.items() if filters.admits(hit)]
            if not allowed:
                return []
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(
                np.array(allowed, dtype="int64")))
        k = min(top_k, len(self.meta))
        scores, ids = self.index.search(vector.reshape(1, -1).astype("float32"), k,
                                        params=params)
        return [self.meta[fid].model_copy(update={"score": float(s)})
                for s, fid in zip(scores[0].tolist(), ids[0].tolist(), strict=True)
                if fid >= 0 and fid in self.meta]
