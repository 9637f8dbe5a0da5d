"""Chunk sets and vectors for the retrieval unit tests."""

from __future__ import annotations

import numpy as np

from services.retrieval.index import IndexConfig, Shard
from shared.contract.records import EmbeddedChunk, EmbeddedChunkSet, encode_vector

DIM = 8
EXACT_IVF = IndexConfig(ivf_threshold=1, nprobe=1_000_000)  # IVF from the start, every list


def unit(seed: int, dim: int = DIM) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=dim).astype("float32")
    return v / np.linalg.norm(v)


def chunk_set(doc: str, version: int, seeds: list[int], *, op: str = "upsert",
              event_time: float = 100.0, domain: str = "d", source: str = "s",
              model: str = "m", dim: int = DIM, acl: tuple[str, ...] = (),
              title: str = "") -> EmbeddedChunkSet:
    chunks = tuple(EmbeddedChunk(chunk_id=f"{doc}#v{version}#{i}", ordinal=i,
                                 text=f"{doc} v{version} c{i}", token_count=3,
                                 vector=encode_vector(unit(s, dim))) for i, s in enumerate(seeds))
    return EmbeddedChunkSet(doc_id=doc, version=version, op=op, source=source, domain=domain,  # type: ignore[arg-type]
                            event_time=event_time, ingest_time=0, model_id=model, dim=dim,
                            chunks=chunks if op == "upsert" else (), acl=acl, title=title)


def settle(shard: Shard) -> None:
    """Wait until no IVF training is running or due (each round ends a training run, so a
    bounded number of rounds, not a clock, says it never settled)."""
    for _ in range(100):
        shard.vectors.wait_trained()
        shard.vectors.maybe_train()
        if shard.vectors._trainer is None:
            return
    raise AssertionError("IVF training was still due after 100 rounds")
