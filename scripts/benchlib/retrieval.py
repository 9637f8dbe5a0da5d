"""Retrieval shard speed, memory, recall and recovery, against exact flat search on the same data.

In-process (the code the retrieval service runs, without Kafka):
  build:    adding n vectors to the exact index; training + filling the IVF that replaces it
  memory:   bytes of the serialized index per million vectors (what RAM holds), metadata beside
  search:   top-10 p50/p99/QPS, unfiltered and filtered (domain + time range, ~2% and ~0.2% of
            chunks admitted): the old Python scan + id hash set, the vectorised bitmap selector,
            and over-fetch-and-retry; each on the exact and the IVF index
  recall:   recall@10 of the IVF against exact search, on clustered data (a Gaussian mixture
            of n/100 clusters; recall on uniform random vectors says nothing), with a sweep
            of nprobe to show the data is not trivially separable
  recovery: 100k chunks: snapshot write, snapshot load, and rebuild from scratch by decoding
            and applying every chunk set as the topic would replay it
  labels:   (--labels) 100k chunks, 1,000 groups, each document in 1-3 groups (2% public), each
            caller in 5 groups: filtered p50/p99 and recall@10 against a brute-force oracle over
            the caller's readable chunks, with the unlabelled (all-access) search of the same
            shard as the baseline ratio
Baseline column: exact flat search on the same data. --million adds 1M vectors (vectors only).
Prints a table and writes bench-results/retrieval.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import faiss
import numpy as np

from scripts.benchlib.paths import RESULTS
from scripts.benchlib.stats import pct
from services.retrieval import snapshot
from services.retrieval.columns import EVERYTHING, Filters
from services.retrieval.index import Shard
from services.retrieval.ivf import build_ivf
from services.retrieval.vectors import IndexConfig, VectorIndex
from shared.contract.access import PUBLIC, Access
from shared.contract.codec import decode, encode
from shared.contract.records import (
    EmbeddedChunk,
    EmbeddedChunkSet,
    SearchHit,
    encode_vector,
)

DIM, K, DOMAINS, DAY = 384, 10, 10, 86_400.0
NOW = 1_800_000_000.0


def mixture(n: int, seed: int, centres: int) -> np.ndarray:
    """Unit vectors around `centres` random directions: neighbours that mean something."""
    rng = np.random.default_rng(seed)
    means = np.random.default_rng(12345).normal(size=(centres, DIM)).astype("float32")
    out = np.empty((n, DIM), dtype="float32")
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        block = means[rng.integers(0, centres, m)] + 1.2 * rng.normal(size=(m, DIM))
        out[start:start + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def nearest(index: VectorIndex, q: np.ndarray) -> list[int]:
    return [i for _, i in index.search(q, K, None)]


def timed(queries: np.ndarray, fn: Callable[[np.ndarray], list[int]]
          ) -> tuple[dict[str, float], list[list[int]]]:
    lat, results = [], []
    for q in queries:
        t0 = time.perf_counter()
        results.append(fn(q))
        lat.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99),
            "qps": len(lat) / (sum(lat) / 1000)}, results


def recall(got: list[list[int]], truth: list[list[int]]) -> float:
    hits = sum(len(set(g) & set(t)) for g, t in zip(got, truth, strict=True))
    return hits / max(1, sum(len(t) for t in truth))


def fill_shard(x: np.ndarray, config: IndexConfig, strategy: str) -> Shard:
    """A shard with n chunks: metadata columns and vectors, added in bulk as replay would."""
    rng = np.random.default_rng(7)
    shard = Shard("bench", DIM, config, strategy)
    slots = [shard.columns.add(SearchHit(
        chunk_id=f"c{i}", doc_id=f"d{i}", version=1, score=0.0,
        event_time=NOW - float(rng.uniform(0, 10 * DAY)), text="", domain=f"dom{i % DOMAINS}",
        source="wiki" if i % 7 else "tickets")) for i in range(len(x))]
    shard.vectors.add(np.array(slots, dtype="int64"), x)
    shard.vectors.wait_trained()
    return shard


def old_scan_search(shard: Shard, q: np.ndarray, f: Filters) -> list[int]:
    """The previous filter: a Python scan over metadata, then an IDSelectorBatch."""
    allowed = np.flatnonzero(shard.columns.scan_mask(f)).astype("int64")
    sel = faiss.IDSelectorBatch(allowed)
    params = (faiss.SearchParametersIVF(sel=sel, nprobe=shard.vectors.config.nprobe)
              if shard.vectors.is_ivf else faiss.SearchParameters(sel=sel))
    _, ids = shard.vectors.index.search(q.reshape(1, -1), K, params=params)
    return [i for i in ids[0].tolist() if i >= 0]


def data(n: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """n vectors and queries from one mixture of n/100 clusters: the same structure at any n."""
    centres = max(16, n // 100)
    return mixture(n, seed=n, centres=centres), mixture(queries, seed=1, centres=centres)


def bench_size(n: int, nq: int, cfg: IndexConfig, rows: list[dict]) -> None:
    print(f"[{n:,}] data ...", flush=True)
    x, queries = data(n, nq)
    t0 = time.perf_counter()
    exact = fill_shard(x, IndexConfig(ivf_threshold=10**12), "selector")
    build_exact = time.perf_counter() - t0
    print(f"[{n:,}] exact shard built in {build_exact:.1f}s; training IVF ...", flush=True)
    t0 = time.perf_counter()
    ivf = fill_shard(x, IndexConfig(ivf_threshold=1, nlist_factor=cfg.nlist_factor,
                                    nprobe=cfg.nprobe), "selector")
    build_ivf_s = time.perf_counter() - t0
    assert ivf.vectors.is_ivf
    nlist = ivf.vectors.index.nlist
    mem = {name: len(s.vectors.serialize()) / n * 1e6 / 2**20 for name, s in
           (("exact", exact), ("ivf", ivf))}
    meta_mb = sum(a.nbytes for a in (exact.columns.event_time, exact.columns.domain,
                                     exact.columns.source, exact.columns.live)) / n * 1e6 / 2**20
    print(f"[{n:,}] IVF nlist={nlist} built in {build_ivf_s:.1f}s; searching ...", flush=True)
    nofilter = Filters(access=EVERYTHING)
    selective = Filters(access=EVERYTHING, domain="dom3", since=NOW - 2 * DAY)  # ~2%
    rare = Filters(access=EVERYTHING, domain="dom3", source="tickets", since=NOW - 2 * DAY)  # ~0.2%
    cases: list[tuple[str, Filters]] = [("no filter", nofilter), ("filter ~2%", selective),
                                        ("filter ~0.2%", rare)]
    for label, f in cases:
        base, truth = timed(queries, partial(ids_of, exact, f=f, strategy="selector"))
        variants = [("exact, bitmap selector", exact, "selector"), ("exact, over-fetch", exact,
                    "overfetch"), (f"IVF nprobe={cfg.nprobe}, bitmap selector", ivf,
                                   "selector"), (f"IVF nprobe={cfg.nprobe}, over-fetch", ivf,
                                                 "overfetch")]
        if f.empty:  # how recall moves with nprobe: the data is not trivially separable
            for nprobe in sorted({1, 4, cfg.nprobe, 4 * cfg.nprobe} - {cfg.nprobe}):
                probe = VectorIndex(DIM, IndexConfig(nprobe=nprobe), ivf.vectors.index)
                stats, got = timed(queries, partial(nearest, probe))
                rows.append(row(n, label, f"IVF nprobe={nprobe}", stats, base, recall(got, truth)))
        if not f.empty:
            stats, got = timed(queries, partial(old_scan_search, exact, f=f))
            rows.append(row(n, label, "exact, Python scan + id set (old)", stats, base,
                            recall(got, truth)))
        for name, shard, strategy in variants:
            if f.empty and strategy == "overfetch":
                continue
            stats, got = timed(queries, partial(ids_of, shard, f=f, strategy=strategy))
            rows.append(row(n, label, name, stats, base, recall(got, truth)))
        print(f"[{n:,}] {label}: done", flush=True)
    rows.append({"n": n, "case": "build", "build_exact_s": build_exact,
                 "build_ivf_s": build_ivf_s, "nlist": nlist, "mib_per_million": mem,
                 "metadata_columns_mib_per_million": meta_mb})


def bench_vectors_only(n: int, nq: int, cfg: IndexConfig, rows: list[dict]) -> None:
    """Exact vs IVF on vectors alone (no chunk metadata): build, memory, latency, recall."""
    print(f"[{n:,}] data (vectors only) ...", flush=True)
    (x, queries), ids = data(n, nq), np.arange(n, dtype="int64")
    t0 = time.perf_counter()
    exact = VectorIndex(DIM, IndexConfig(ivf_threshold=10**12))
    exact.add(ids, x)
    build_exact = time.perf_counter() - t0
    print(f"[{n:,}] exact built in {build_exact:.1f}s; training IVF ...", flush=True)
    t0 = time.perf_counter()
    ivf = VectorIndex(DIM, cfg, build_ivf(DIM, x, ids, cfg))
    build_ivf_s = time.perf_counter() - t0
    mem = {name: len(v.serialize()) / n * 1e6 / 2**20 for name, v in
           (("exact", exact), ("ivf", ivf))}
    del x
    print(f"[{n:,}] IVF nlist={ivf.index.nlist} built in {build_ivf_s:.1f}s; searching ...",
          flush=True)
    base, truth = timed(queries, partial(nearest, exact))
    rows.append(row(n, "no filter", "exact (vectors only)", base, base, 1.0))
    for nprobe in sorted({cfg.nprobe, 4 * cfg.nprobe, 16 * cfg.nprobe}):
        probe = VectorIndex(DIM, IndexConfig(nprobe=nprobe), ivf.index)
        stats, got = timed(queries, partial(nearest, probe))
        rows.append(row(n, "no filter", f"IVF nprobe={nprobe} (vectors only)", stats, base,
                        recall(got, truth)))
    rows.append({"n": n, "case": "build", "build_exact_s": build_exact,
                 "build_ivf_s": build_ivf_s, "nlist": ivf.index.nlist, "mib_per_million": mem,
                 "metadata_columns_mib_per_million": 0.0})


def ids_of(shard: Shard, q: np.ndarray, f: Filters, strategy: str) -> list[int]:
    mask = None if f.empty else shard.columns.mask(f)
    return [i for _, i in shard.vectors.search(q, K, mask, strategy)]


def row(n: int, case: str, method: str, stats: dict, base: dict, rec: float) -> dict:
    return {"n": n, "case": case, "method": method, **stats, "baseline_p50_ms": base["p50_ms"],
            "baseline_p99_ms": base["p99_ms"], "ratio_p99": stats["p99_ms"] / base["p99_ms"],
            "recall_at_10": rec}


def bench_recovery(n: int, cfg: IndexConfig) -> dict:
    """Snapshot write/load and rebuild-from-topic-records for n chunks (4 per document)."""
    print(f"[recovery {n:,}] encoding {n // 4:,} chunk sets ...", flush=True)
    x = mixture(n, seed=99, centres=max(16, n // 100))
    records = []
    for d in range(n // 4):
        chunks = tuple(EmbeddedChunk(chunk_id=f"d{d}#v1#{i}", ordinal=i,
                                     text=f"chunk {i} of document {d} " * 20, token_count=40,
                                     vector=encode_vector(x[4 * d + i])) for i in range(4))
        records.append(encode(EmbeddedChunkSet(
            doc_id=f"d{d}", version=1, source="wiki", domain=f"dom{d % DOMAINS}",
            event_time=NOW - d, ingest_time=NOW, model_id="bench", dim=DIM, chunks=chunks)))
    print(f"[recovery {n:,}] rebuilding from records (the replay path) ...", flush=True)
    t0 = time.perf_counter()
    shard = Shard("bench", DIM, cfg)
    for offset, raw in enumerate(records):
        shard.apply(decode(EmbeddedChunkSet, raw))
        shard.offset = offset
    replay_s = time.perf_counter() - t0
    shard.vectors.wait_trained()
    with tempfile.TemporaryDirectory() as tmp:
        path = snapshot.path_for(Path(tmp), 0)
        t0 = time.perf_counter()
        snapshot.save(shard, path)
        save_s, size = time.perf_counter() - t0, path.stat().st_size
        t0 = time.perf_counter()
        loaded = snapshot.load(path, "bench", DIM, cfg)
        load_s = time.perf_counter() - t0
    assert loaded is not None and len(loaded) == n and loaded.offset == len(records) - 1
    q = mixture(1, seed=5, centres=max(16, n // 100))[0]
    assert [h.chunk_id for h in loaded.search(q, K, Filters(access=EVERYTHING))] == \
        [h.chunk_id for h in shard.search(q, K, Filters(access=EVERYTHING))]
    return {"chunks": n, "replay_from_scratch_s": replay_s, "snapshot_save_s": save_s,
            "snapshot_load_s": load_s, "snapshot_mib": size / 2**20,
            "ivf_after_replay": shard.vectors.is_ivf}


def bench_broker_recovery(n: int) -> dict:
    """A real retrieval worker on a real broker: time to answer for n chunks, cold and warm."""
    import asyncio
    import re

    from aiokafka import AIOKafkaProducer

    from scripts.benchlib.shard_client import Asker
    from services.cli.mesh import free_port, spawn_broker
    from services.cli.procs import service_argv, spawn, stop
    from shared.contract.topics import CHUNKS_EMBEDDED
    from shared.kafka.admin import ensure_topics
    from shared.settings import KafkaSettings

    x = mixture(n, seed=99, centres=max(16, n // 100))
    with tempfile.TemporaryDirectory() as tmp:
        run, port = Path(tmp), free_port()
        broker = spawn_broker("127.0.0.1", port, run)
        kafka = KafkaSettings(bootstrap=f"127.0.0.1:{port}")
        children = [broker]
        try:
            asyncio.run(ensure_topics(kafka, wait_s=30))

            async def produce() -> None:
                producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5)
                await producer.start()
                for d in range(n // 4):
                    chunks = tuple(EmbeddedChunk(
                        chunk_id=f"d{d}#v1#{i}", ordinal=i, text=f"chunk {i} of {d} " * 20,
                        token_count=40, vector=encode_vector(x[4 * d + i])) for i in range(4))
                    value = encode(EmbeddedChunkSet(
                        doc_id=f"d{d}", version=1, source="wiki", domain="ops",
                        event_time=NOW, ingest_time=NOW, model_id="bench", dim=DIM,
                        chunks=chunks))
                    await producer.send(CHUNKS_EMBEDDED.name, value, key=f"d{d}".encode())
                    if d % 5000 == 0:
                        print(f"[broker recovery] produced {d:,}/{n // 4:,} chunk sets",
                              flush=True)
                await producer.stop()

            asyncio.run(produce())
            env = {"STREAMRAG_KAFKA_BOOTSTRAP": kafka.bootstrap,
                   "STREAMRAG_DATA_DIR": str(run / "data"),
                   "STREAMRAG_RETRIEVAL_SNAPSHOT_INTERVAL_S": "3600"}

            def start_and_wait(name: str) -> float:
                t0 = time.monotonic()
                child = spawn(name, service_argv("retrieval"), run, env)
                children.append(child)

                async def wait() -> None:
                    async with Asker(kafka.bootstrap, "bench", DIM) as ask:
                        q, deadline = x[0], time.monotonic() + 900
                        while time.monotonic() < deadline:
                            replies = await ask.scatter(q, 1, None)
                            if any(r.error not in ("", "recovering") for r in replies):
                                raise RuntimeError(f"shard error: {replies}")
                            if (len(replies) == CHUNKS_EMBEDDED.partitions
                                    and not any(r.error for r in replies)
                                    and sum(r.shard_size for r in replies) == n):
                                return
                            await asyncio.sleep(0.5)
                    raise TimeoutError(f"{name} did not answer for all chunks in 900 s")
                asyncio.run(wait())
                elapsed = time.monotonic() - t0
                print(f"[broker recovery] {name}: all {n:,} chunks answerable after "
                      f"{elapsed:.1f}s", flush=True)
                stop([child], 120)  # SIGTERM: the worker snapshots its shards on the way out
                return elapsed

            cold = start_and_wait("retrieval-cold")
            warm = start_and_wait("retrieval-warm")
            log = (run / "logs" / "retrieval-warm.log").read_text()
            loads = [float(s) for s in re.findall(r"loaded \d+ chunks at offset \d+ in ([\d.]+)s",
                                                   log)]
        finally:
            stop(children, 30)
    return {"chunks": n, "cold_start_to_answers_s": cold, "warm_start_to_answers_s": warm,
            "snapshot_loads_s": loads}


def labelled_shard(x: np.ndarray, config: IndexConfig, acls: list[tuple[str, ...]]) -> Shard:
    """A shard whose chunk i carries acls[i // 4] (four chunks per document)."""
    shard = Shard("bench", DIM, config)
    slots = [shard.columns.add(SearchHit(
        chunk_id=f"c{i}", doc_id=f"d{i // 4}", version=1, score=0.0, event_time=NOW, text="",
        domain="dom", source="wiki", acl=acls[i // 4])) for i in range(len(x))]
    shard.vectors.add(np.array(slots, dtype="int64"), x)
    shard.vectors.wait_trained()
    return shard


def bench_labels(n: int, nq: int, groups: int, per_caller: int, cfg: IndexConfig) -> dict:
    """Access-filtered search at n chunks: each caller reads its groups' and public chunks."""
    rng = np.random.default_rng(2026)
    x, queries = data(n, nq)
    names = [f"group{g}" for g in range(groups)]
    acls = [tuple(sorted({*rng.choice(names, int(rng.integers(1, 4)), replace=False),
                          *([PUBLIC] if rng.random() < 0.02 else [])}))
            for _ in range((n + 3) // 4)]
    # 10% of documents also carry "wide": callers holding it read ~13%, a share at which the
    # IVF probes only part of its lists (the approximate path).
    wide = np.random.default_rng(7).random(len(acls)) < 0.10
    acls = [(*acl, "wide") if w else acl for acl, w in zip(acls, wide, strict=True)]
    callers = [Access.of(f"user{i}", rng.choice(names, per_caller, replace=False).tolist())
               for i in range(nq)]
    print(f"[labels {n:,}] {groups} groups, {len(acls):,} documents; building shards ...",
          flush=True)
    t0 = time.perf_counter()
    ivf = labelled_shard(x, IndexConfig(nprobe=cfg.nprobe, nlist_factor=cfg.nlist_factor,
                                        ivf_threshold=min(cfg.ivf_threshold, n)), acls)
    assert ivf.vectors.is_ivf
    exact = labelled_shard(x, IndexConfig(ivf_threshold=10**12), acls)
    print(f"[labels {n:,}] built in {time.perf_counter() - t0:.1f}s; searching ...", flush=True)
    labels_mib = sum(b.nbytes for b in ivf.columns.labels.values()) / 2**20
    readable = [int(ivf.columns.access_mask(a).sum()) for a in callers]
    # Callers who may read little (~0.4%): two groups, no public documents at all.
    few = [Access(frozenset(rng.choice(names, 2, replace=False).tolist())) for _ in range(nq)]
    few_readable = float(np.median([int(ivf.columns.access_mask(a).sum()) for a in few]))
    broad = [Access(a.grants | {"wide"}) for a in callers]
    broad_readable = float(np.median([int(ivf.columns.access_mask(a).sum()) for a in broad]))

    def truth_of(a: Access, q: np.ndarray) -> list[int]:  # the oracle: numpy over the readable
        docs = np.fromiter((a.admits(acl) for acl in acls), dtype=bool, count=len(acls))
        ids = np.flatnonzero(np.repeat(docs, 4)[:n])
        scores = x[ids] @ q
        return ids[np.argsort(-scores, kind="stable")[:K]].tolist()

    truth = [truth_of(a, q) for a, q in zip(callers, queries, strict=True)]
    few_truth = [truth_of(a, q) for a, q in zip(few, queries, strict=True)]
    broad_truth = [truth_of(a, q) for a, q in zip(broad, queries, strict=True)]
    everyone = [nearest(exact.vectors, q) for q in queries]

    def run(shard: Shard, access: list[Access] | None, exact_below: int | None = None
            ) -> tuple[dict[str, float], list[list[int]]]:
        if exact_below is not None:
            shard.vectors.config = IndexConfig(**{**vars(shard.vectors.config),
                                                  "exact_below": exact_below})
        lat, results = [], []
        for i, q in enumerate(queries):
            f = Filters(access=EVERYTHING) if access is None else Filters(access=access[i])
            t0 = time.perf_counter()
            results.append(ids_of(shard, q, f, "selector"))
            lat.append((time.perf_counter() - t0) * 1000)
        return ({"p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99),
                 "qps": len(lat) / (sum(lat) / 1000)}, results)

    rows = []
    default = IndexConfig().exact_below
    for name, shard in ((f"IVF nprobe={cfg.nprobe}", ivf), ("exact flat", exact)):
        base, got = run(shard, None, default)
        rows.append({"index": name, "case": "unlabelled (all access)", **base,
                     "ratio_p99": 1.0, "recall_at_10": recall(got, everyone)})
        for label, who, oracle, below in (
                ("5 groups + public", callers, truth, default),
                ("5 groups + public, exact_below=0", callers, truth, 0),
                ("2 groups, no public", few, few_truth, default),
                ("2 groups, no public, exact_below=0", few, few_truth, 0),
                ("5 groups + public + wide", broad, broad_truth, default)):
            stats, got = run(shard, who, below)
            rows.append({"index": name, "case": label, **stats,
                         "ratio_p99": stats["p99_ms"] / base["p99_ms"],
                         "recall_at_10": recall(got, oracle)})
        print(f"[labels {n:,}] {name}: done", flush=True)
    masks = [time.perf_counter()]
    for a in callers:
        ivf.columns.mask(Filters(access=a))
    mask_ms = (time.perf_counter() - masks[0]) * 1000 / len(callers)
    return {"chunks": n, "groups": groups, "groups_per_caller": per_caller,
            "readable_median": float(np.median(readable)), "readable_min": min(readable),
            "readable_max": max(readable), "few_readable_median": few_readable,
            "broad_readable_median": broad_readable,
            "label_bitmaps_mib": labels_mib,
            "mask_ms": mask_ms, "rows": rows}


def print_labels(result: dict) -> None:
    r = result
    print(f"\naccess labels, {r['chunks']:,} chunks, {r['groups']:,} groups, each caller in "
          f"{r['groups_per_caller']} (+ public + its user label): readable chunks per caller "
          f"median {r['readable_median']:,.0f} (min {r['readable_min']:,}, max "
          f"{r['readable_max']:,}), in 2 groups without public "
          f"{r['few_readable_median']:,.0f}, with wide {r['broad_readable_median']:,.0f}; "
          f"label bitmaps {r['label_bitmaps_mib']:.1f} MiB; "
          f"caller mask {r['mask_ms']:.2f} ms")
    print(f"{'index':<16} {'case':<36} {'p50 ms':>7} {'p99 ms':>7} {'QPS':>7} "
          f"{'p99 vs unlabelled':>17} {'rec@10':>6}")
    for row in r["rows"]:
        print(f"{row['index']:<16} {row['case']:<36} {row['p50_ms']:7.2f} {row['p99_ms']:7.2f} "
              f"{row['qps']:7.0f} {row['ratio_p99']:16.2f}x {row['recall_at_10']:6.3f}")
    print("recall: against a brute-force oracle over each caller's readable chunks "
          "(unlabelled: against exact search)")


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_retrieval", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--million", action="store_true", help="also 1M vectors (slow)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--nprobe", type=int, default=IndexConfig().nprobe)
    ap.add_argument("--nlist-factor", type=float, default=IndexConfig().nlist_factor)
    ap.add_argument("--recovery-chunks", type=int, default=100_000)
    ap.add_argument("--broker-recovery", action="store_true",
                    help="also a real worker on a real broker recovering --recovery-chunks")
    ap.add_argument("--labels", action="store_true",
                    help="only the access-label case: --label-chunks chunks, --groups groups")
    ap.add_argument("--label-chunks", type=int, default=100_000)
    ap.add_argument("--groups", type=int, default=1000)
    args = ap.parse_args()
    cfg = IndexConfig(nprobe=args.nprobe, nlist_factor=args.nlist_factor)
    if args.labels:
        print(f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads", flush=True)
        result = bench_labels(args.label_chunks, args.queries, args.groups, 5, cfg)
        print_labels(result)
        out = RESULTS / "retrieval_labels.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"config": vars(args), **result}, indent=2))
        print(f"wrote {out}")
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s] + ([1_000_000] if args.million else [])
    print(f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads, "
          f"GPUs: {faiss.get_num_gpus()}", flush=True)
    rows: list[dict] = []
    for n in sizes:
        if n >= 1_000_000:
            bench_vectors_only(n, min(100, args.queries), cfg, rows)
        else:
            bench_size(n, args.queries, cfg, rows)
    recovery = bench_recovery(args.recovery_chunks, IndexConfig()) if args.recovery_chunks \
        else None
    broker = bench_broker_recovery(args.recovery_chunks) if args.broker_recovery else None
    print_table(rows, recovery)
    if broker:
        print(f"real worker + broker, {broker['chunks']:,} chunks: process start to all "
              f"answerable {broker['cold_start_to_answers_s']:.1f}s from the topic alone, "
              f"{broker['warm_start_to_answers_s']:.1f}s from snapshots (loads "
              f"{', '.join(f'{t:.1f}s' for t in broker['snapshot_loads_s'])})")
    out = RESULTS / "retrieval.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"config": vars(args), "rows": rows, "recovery": recovery,
                               "broker_recovery": broker},
                              indent=2))
    print(f"wrote {out}")
    return 0


def print_table(rows: list[dict], recovery: dict | None) -> None:
    if rows:
        print_search(rows)
    if recovery:
        print(f"\nrecovery, {recovery['chunks']:,} chunks: rebuild from records "
              f"{recovery['replay_from_scratch_s']:.1f}s, snapshot write "
              f"{recovery['snapshot_save_s']:.1f}s ({recovery['snapshot_mib']:.0f} MiB), "
              f"snapshot load {recovery['snapshot_load_s']:.1f}s")


def print_search(rows: list[dict]) -> None:
    print(f"\n{'n':>9} {'case':<13} {'method':<36} {'p50 ms':>7} {'p99 ms':>7} {'QPS':>7} "
          f"{'base p99':>8} {'ratio':>6} {'rec@10':>6}")
    for r in rows:
        if r["case"] == "build":
            continue
        print(f"{r['n']:>9,} {r['case']:<13} {r['method']:<36} {r['p50_ms']:7.2f} "
              f"{r['p99_ms']:7.2f} {r['qps']:7.0f} {r['baseline_p99_ms']:8.2f} "
              f"{r['ratio_p99']:5.2f}x {r['recall_at_10']:6.3f}")
    print("baseline: exact flat search, bitmap selector, same data and filter\n")
    print(f"{'n':>9} {'build exact s':>13} {'build IVF s':>11} {'nlist':>6} "
          f"{'exact MiB/1M':>12} {'IVF MiB/1M':>10} {'meta cols MiB/1M':>16}")
    for r in rows:
        if r["case"] == "build":
            print(f"{r['n']:>9,} {r['build_exact_s']:13.2f} {r['build_ivf_s']:11.2f} "
                  f"{r['nlist']:>6} {r['mib_per_million']['exact']:12.0f} "
                  f"{r['mib_per_million']['ivf']:10.0f} "
                  f"{r['metadata_columns_mib_per_million']:16.1f}")


if __name__ == "__main__":
    sys.exit(main())
