"""A shard on disk: its FAISS index, metadata and the offset it has applied, written atomically.

One .npz per partition (uncompressed zip of two byte arrays, no pickle): `index` is
faiss.serialize_index, `state` is JSON. A new file replaces the old only once complete,
so a kill -9 mid-write leaves the previous snapshot, which replay from its offset still
makes current.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from services.retrieval.columns import Columns
from services.retrieval.index import Shard
from services.retrieval.index_config import IndexConfig, Strategy
from services.retrieval.vectors import VectorIndex
from shared.contract.records import SearchHit
from shared.worker.status_files import replacing

FORMAT = 1


def path_for(directory: Path, partition: int) -> Path:
    """The partition's snapshot in `directory` (one folder per model: shards.py)."""
    return directory / f"shard-{partition}.npz"


@dataclass(frozen=True)
class Captured:
    """A shard's state copied at one instant; writing it can then happen off the event loop."""

    index: np.ndarray
    state: dict[str, Any]
    hits: list[SearchHit | None]


def capture(shard: Shard) -> Captured:
    """Copy what a snapshot needs (fast: the index bytes and shallow copies of the rest)."""
    state = {"format": FORMAT, "model_id": shard.model_id, "dim": shard.dim,
             "offset": shard.offset, "digest": shard.digest, "doc_version": dict(shard.doc_version),
             "doc_slots": dict(shard.doc_slots),  # slot lists are replaced, never mutated
             "doc_written": dict(shard.doc_written), "caught_up": shard.caught_up}
    return Captured(shard.vectors.serialize(), state, list(shard.columns.hits))


def write(captured: Captured, path: Path) -> None:
    """Write a captured shard to `path`, replacing any older snapshot only once complete."""
    state = {**captured.state,
             "hits": [h.model_dump() if h is not None else None for h in captured.hits]}
    raw = np.frombuffer(json.dumps(state, separators=(",", ":")).encode(), dtype="uint8")
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path, durable=True) as f:
        np.savez(f, index=captured.index, state=raw)


def save(shard: Shard, path: Path) -> None:
    write(capture(shard), path)


def load(path: Path, model_id: str, dim: int, config: IndexConfig,
         strategy: Strategy = "selector", lexical: bool = False) -> Shard | None:
    """The shard saved at `path`, or None when there is none or it is for another model.

    The lexical index is not stored: it is rebuilt from the stored chunk texts."""
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as data:
        state = json.loads(data["state"].tobytes())
        if (state.get("format"), state["model_id"], state["dim"]) != (FORMAT, model_id, dim):
            return None
        vectors = VectorIndex.deserialize(dim, config, data["index"])
    shard = Shard(model_id, dim, config, strategy, lexical)
    shard.vectors = vectors
    shard.columns = Columns.restore([SearchHit.model_validate(h) if h is not None else None
                                     for h in state["hits"]])
    shard.doc_version = state["doc_version"]
    shard.doc_slots = state["doc_slots"]
    # A snapshot written before ingest times were kept: a document's event time (no later
    # than its ingest) stands in, so the text retention never keeps it longer.
    shard.doc_written = state.get("doc_written") or {
        d: shard.columns.hits[slots[0]].event_time  # type: ignore[union-attr]
        for d, slots in shard.doc_slots.items() if slots}
    shard.offset, shard.digest = state["offset"], state.get("digest", "")
    shard.caught_up = bool(state.get("caught_up", False))
    shard.rebuild_lexical()
    vectors.maybe_train()  # a snapshot saved while an IVF was training resumes it
    return shard
