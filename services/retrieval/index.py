"""One partition's shard: document-level upserts and deletes, filtered top-k search.

With a lexical index, a search that carries the question's text returns the union of the
dense top k and the BM25 top k, every hit with both its inner product (`score`) and its
BM25 (`lexical`), so inference can fuse the shards' candidates by rank (search/fusion.py).
"""

from __future__ import annotations

import binascii
import logging
import math
from collections.abc import Callable

import numpy as np
from pydantic_core import PydanticSerializationError

from services.retrieval.columns import Columns, Filters
from services.retrieval.index_config import IndexConfig, Strategy
from services.retrieval.lexical import LexicalIndex
from services.retrieval.vectors import VectorIndex
from shared.contract.records import EmbeddedChunkSet, SearchHit
from shared.encoder.passage import passage
from shared.errors import InvalidInput, ModelMismatchError

__all__ = ["Filters", "IndexConfig", "Shard"]
log = logging.getLogger(__name__)


class Shard:
    """The chunks of one partition: vectors in FAISS, metadata in columns beside them.

    `offset` is the last offset of the partition applied here (-1: none), so a snapshot
    of the shard knows where replay must resume; `digest` is that record's digest, so a
    snapshot can tell whether the log it came from is still the log on the broker.
    """

    def __init__(self, model_id: str, dim: int, config: IndexConfig | None = None,
                 strategy: Strategy = "selector", lexical: bool = False) -> None:
        self.model_id, self.dim, self.strategy = model_id, dim, strategy
        self.vectors = VectorIndex(dim, config or IndexConfig())
        self.columns = Columns()
        self.lexical = LexicalIndex() if lexical else None
        self.doc_slots: dict[str, list[int]] = {}
        self.doc_version: dict[str, int] = {}
        # When the version held of each document was ingested: the text retention expires
        # it from the shard by that time (expire), as the broker expires its records.
        self.doc_written: dict[str, float] = {}
        self.offset = -1
        self.digest = ""
        self.dropped = 0  # hits left out of replies because they cannot be serialised
        # Has held every document of the partition's other models' shards (shards.py).
        self.caught_up = False

    def __len__(self) -> int:
        return len(self.columns)

    def apply(self, update: EmbeddedChunkSet) -> bool:
        """Replace a document's chunks with this version's (none for a delete).

        Returns False for a stale version (an older one replayed after a newer).
        """
        if update.op == "upsert" and (update.model_id != self.model_id or update.dim != self.dim):
            msg = f"{update.model_id}/{update.dim} != index {self.model_id}/{self.dim}"
            raise ModelMismatchError(msg)
        if update.version < self.doc_version.get(update.doc_id, 0):
            return False
        vectors = _vectors(update, self.dim) if update.op == "upsert" and update.chunks else None
        self._remove_doc(update.doc_id)
        self.doc_version[update.doc_id] = update.version
        if vectors is None:
            return True
        self.doc_written[update.doc_id] = update.ingest_time
        slots = [self.columns.add(SearchHit(
            chunk_id=c.chunk_id, doc_id=update.doc_id, version=update.version, score=0.0,
            event_time=update.event_time, text=c.text, title=update.title,
            domain=update.domain, source=update.source, acl=update.acl))
            for c in update.chunks]
        self.vectors.add(np.array(slots, dtype="int64"), vectors)
        if self.lexical is not None:
            for slot, c in zip(slots, update.chunks, strict=True):
                self.lexical.add(slot, passage(update.title, c.text))
        self.doc_slots[update.doc_id] = slots
        return True

    def rebuild_lexical(self) -> None:
        """Index every stored chunk's words again (a snapshot keeps only the texts)."""
        if self.lexical is None:
            return
        self.lexical = LexicalIndex(self.lexical.k1, self.lexical.b)
        for slot, hit in enumerate(self.columns.hits):
            if hit is not None:
                self.lexical.add(slot, passage(hit.title, hit.text))

    def expire(self, before: float) -> list[str]:
        """Remove every document whose version here was ingested before `before` (epoch s):
        its chunks, vectors and words leave the index; its version stays known, so an older
        one replayed later is still refused. Returns the documents removed."""
        old = sorted(d for d, t in self.doc_written.items() if t < before)
        for doc_id in old:
            self._remove_doc(doc_id)
        return old

    def forget(self, gone: Callable[[str, int], bool]) -> list[str]:
        """Remove every document whose version here `gone` says was forgotten (its data key
        destroyed: a snapshot from before a forget, restored from a backup). Returns the
        documents removed."""
        out = sorted(d for d, v in self.doc_version.items()
                     if d in self.doc_slots and gone(d, v))
        for doc_id in out:
            self._remove_doc(doc_id)
        return out

    def _remove_doc(self, doc_id: str) -> None:
        self.doc_written.pop(doc_id, None)
        old = self.doc_slots.pop(doc_id, [])
        if old:
            self.vectors.remove(np.array(old, dtype="int64"))
            for slot in old:
                self.columns.remove(slot)
                if self.lexical is not None:
                    self.lexical.remove(slot)

    def search(self, vector: np.ndarray, top_k: int, filters: Filters,
               text: str = "") -> list[SearchHit]:
        """The dense top k; with `text` and a lexical index, also the BM25 top k (see above).

        Only chunks `filters.access` may read are candidates (the mask goes into FAISS and
        BM25, so the top k is filled with readable chunks); hits leave without their labels.
        """
        if not len(self.columns):
            return []
        mask = None if filters.empty else self.columns.mask(filters)
        found = self.vectors.search(vector, top_k, mask, self.strategy)
        hits = self.columns.hits
        if text and self.lexical is not None:
            out = self._hybrid(vector, text, top_k, mask, found, filters)
        else:
            out = [hit.model_copy(update={"score": score, "acl": ()}) for score, slot in found
                   if (hit := hits[slot]) is not None]
        kept = [hit for hit in out if travels(hit)]
        if len(kept) < len(out):
            self.dropped += len(out) - len(kept)
            log.warning("%d stored hit(s) cannot travel in a reply (invalid text or a "
                        "non-finite event time): left out", len(out) - len(kept))
        return kept


    def _hybrid(self, vector: np.ndarray, text: str, top_k: int, mask: np.ndarray | None,
                found: list[tuple[float, int]], filters: Filters) -> list[SearchHit]:
        assert self.lexical is not None
        size = self.columns.size
        # BM25's corpus statistics (documents, document frequencies, mean length) over the
        # chunks the caller may read, so no score moves with a chunk it may not.
        corpus = None if filters.access.all_access else self.columns.access_mask(filters.access)
        bm25 = self.lexical.scores(text, size, corpus)
        dense = {slot: score for score, slot in found}
        live = self.columns.live[:size] if mask is None else mask[:size]
        ranked = np.flatnonzero((bm25 > 0) & live)
        if len(ranked) > top_k:
            ranked = ranked[np.argpartition(-bm25[ranked], top_k - 1)[:top_k]]
        extra = np.array([s for s in ranked.tolist() if s not in dense], dtype="int64")
        if len(extra):
            q = np.asarray(vector, dtype="float32").reshape(-1)
            dense.update(zip(extra.tolist(), (self.vectors.vectors_of(extra) @ q).tolist(),
                             strict=True))
        hits = self.columns.hits
        return [hit.model_copy(update={"score": score, "lexical": float(bm25[slot]), "acl": ()})
                for slot, score in dense.items() if (hit := hits[slot]) is not None]


def _vectors(update: EmbeddedChunkSet, dim: int) -> np.ndarray:
    try:
        arrays = [c.array() for c in update.chunks]
    except (ValueError, binascii.Error) as exc:
        raise InvalidInput("invalid_vector", "chunks.vector", "not base64 float32") from exc
    if any(a.shape != (dim,) for a in arrays):
        sizes = sorted({a.shape[0] for a in arrays})
        raise ModelMismatchError(f"vectors of dimension {sizes} != declared {dim}")
    vectors = np.stack(arrays).astype("float32")
    if not np.isfinite(vectors).all():
        raise InvalidInput("invalid_vector", "chunks.vector", "NaN or infinite component")
    return vectors


def travels(hit: SearchHit) -> bool:
    """True when the hit survives the JSON reply: one that cannot (a lone surrogate in its
    text, or a NaN event time, which JSON carries as null) would fail the shard's whole
    reply, so it is left out instead."""
    if not math.isfinite(hit.event_time):
        return False
    try:
        hit.model_dump_json()
    except PydanticSerializationError:
        return False
    return True
