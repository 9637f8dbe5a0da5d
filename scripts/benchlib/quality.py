"""Retrieval quality on BEIR collections: the mesh against an in-process baseline, one run.

    scripts/bench_quality DIR [DIR ...] [--docs N] [--queries N] [--mode local|mesh|both]
                          [--model PATH ...] [--reranker PATH] [--chunk-top-k K] [--sweep]

Prints one table, collections x models x configurations, each scored with the same
judgements (qrels/test.tsv, else qrels/train.tsv): nDCG@10, Recall@10, Recall@100 (BEIR /
pytrec_eval definitions, services/inference/search/relevance.py), the nDCG@10 delta and
ratio to the in-process dense baseline of the same collection and model, ingest docs/s
(and its ratio to the baseline's encoding rate), and query latency p50/p99 (one client).
Configurations:
  in-process dense   the model over whole documents ("title text", truncated at 256 tokens,
                     as BEIR does), exact FAISS inner product: the baseline. Ingest is its
                     encoding rate; latency = encoding the question + one FAISS search;
  in-process bm25s   bm25s (Lucene BM25, the shard index's tokens) over whole documents;
  pipeline ...       (local) the services' own code without a broker: the chunking service's
                     chunker (title in every chunk's embedding input), embed_sets, four
                     retrieval Shards, inference's merge and fusion (no redaction). Ingest
                     is chunk+embed docs/s; latency = encoding + searching the four shards;
                     dense, bm25 (the shard's BM25 alone), hybrid (inference's default fusion;
                     --sweep adds other fusion settings);
  mesh dense/hybrid  (mesh) the corpus produced to docs.raw.v1 on an isolated embedded mesh
                     (every service, redaction included), then the mesh's shards asked over
                     Kafka by inference's own SearchClient, dense only and fused. Ingest is
                     produce -> searchable docs/s; latency = encoding + the Kafka search;
  mesh Retrieve      every query over gRPC Retrieve with the mesh's defaults (hybrid on);
  ... + reranker     with --reranker PATH (default $STREAMRAG_INFERENCE_RERANKER_PATH) the
                     mesh runs inference's cross-encoder stage from that folder and the
                     Retrieve row is "mesh hybrid + reranker", ranked in the server's order;
                     without one the row says "n/a (no reranker model)".
--model PATH (repeatable; default the shipped all-MiniLM-L6-v2) scores each Hugging Face
sentence-transformers folder in local mode; the mesh runs the default model only.
Chunk hits rank documents by their best chunk. Documents without text are sent with
their title as text (the mesh refuses an empty text; the baseline embeds the same words);
documents with neither are left out and counted. `--docs N` keeps the judged documents of
the chosen queries plus the first others of the corpus up to N (smaller and easier: compare
rows within one run, not with published figures). Ctrl-C, SIGTERM or any error stops the
mesh's processes (services/cli/exits.py). Writes bench-results/quality.json (--out).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from scripts.benchlib.paths import ANVIL, RESULTS, ROOT
from scripts.benchlib.progress import Progress
from scripts.benchlib.relevance import (
    Qrels,
    documents_by_best_chunk,
    documents_in_order,
    evaluate,
)
from services.chunking.documents import DocumentChunker
from services.chunking.settings import ChunkingSettings
from services.cli.exits import stopped_on_exit
from services.embedding.vectors import embed_sets
from services.inference.search.fusion import Fusion
from services.inference.search.gather import ShardAnswer, merge_hits
from services.inference.settings import InferenceSettings
from services.retrieval.columns import EVERYTHING
from services.retrieval.index import Filters, Shard
from services.retrieval.lexical import terms
from services.retrieval.settings import RetrievalSettings
from shared.contract.codec import decode, encode
from shared.contract.records import EmbeddedChunkSet, RedactedDocument
from shared.encoder.embedder import Encoder
from shared.encoder.model import MODEL_ID

SHARDS = 4
CACHE = RESULTS / "quality-cache"
# The vectors depend on these files: a change to any of them re-encodes.
PIPELINE_CODE = ("services/chunking/documents.py", "services/chunking/chunker.py",
                 "services/embedding/vectors.py", "shared/encoder/passage.py",
                 "shared/encoder/embedder.py")
METRICS = ("NDCG@10", "Recall@10", "Recall@100")
BASELINE = "in-process dense"
NO_RERANKER = "n/a (no reranker model)"


@dataclass(frozen=True)
class Collection:
    name: str
    docs: dict[str, tuple[str, str]]  # doc id -> (title, text), corpus order
    queries: dict[str, str]  # query id -> text, file order
    qrels: dict[str, dict[str, int]]
    empty: int  # documents left out: neither title nor text


@dataclass
class Row:
    collection: str
    model: str
    config: str
    scores: dict[str, dict[str, float]] | None = None  # split -> metric -> value
    ingest_docs_s: float | None = None
    latencies_ms: list[float] | None = None
    note: str = ""  # why a row has no figures ("n/a (...)"), or a footnote

    def summary(self) -> dict[str, Any]:
        lat = self.latencies_ms or []
        return {"collection": self.collection, "model": self.model, "config": self.config,
                "scores": self.scores, "ingest_docs_s": self.ingest_docs_s,
                "p50_ms": statistics.median(lat) if lat else None,
                "p99_ms": float(np.percentile(lat, 99)) if lat else None, "note": self.note}


def load(path: Path, max_docs: int | None, max_queries: int | None) -> Collection:
    split = "test" if (path / "qrels/test.tsv").exists() else "train"
    qrels: dict[str, dict[str, int]] = {}
    for line in (path / f"qrels/{split}.tsv").read_text().splitlines()[1:]:
        q, d, grade = line.split("\t")
        qrels.setdefault(q, {})[d] = int(grade)
    queries = {}
    for line in (path / "queries.jsonl").read_text().splitlines():
        obj = json.loads(line)
        if obj["_id"] in qrels and any(g > 0 for g in qrels[obj["_id"]].values()):
            queries[obj["_id"]] = obj["text"]
    queries = dict(list(queries.items())[:max_queries])
    qrels = {q: qrels[q] for q in queries}
    corpus, empty = {}, 0
    with open(path / "corpus.jsonl") as f:
        for line in f:
            obj = json.loads(line)
            title, text = obj.get("title", ""), obj["text"]
            if not text.strip():
                title, text = "", title  # the mesh refuses an upsert without text
            if text.strip():
                corpus[obj["_id"]] = (title, text)
            else:
                empty += 1
    judged = [d for q in qrels for d in qrels[q] if d in corpus]
    keep = dict.fromkeys(judged)
    for d in corpus:
        if max_docs is not None and len(keep) >= max_docs:
            break
        keep.setdefault(d)
    docs = {d: corpus[d] for d in corpus if d in keep}
    return Collection(f"{path.name}/{split}", docs, queries, qrels, empty)


def splits(c: Collection) -> dict[str, Qrels]:
    ids = list(c.queries)
    return {"all": c.qrels,
            "even (tune)": {q: c.qrels[q] for q in ids[0::2]},
            "odd (held out)": {q: c.qrels[q] for q in ids[1::2]}}


def score(c: Collection, run: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    return {name: evaluate(qrels, run, (10, 100)) for name, qrels in splits(c).items()}


def in_batches(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


# --- in-process ------------------------------------------------------------------------


def cache_key(*parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(json.dumps(part, sort_keys=True).encode())
    return h.hexdigest()[:20]


def encode_queries(enc: Encoder, c: Collection) -> tuple[np.ndarray, list[float]]:
    """Each question alone, as a user asks it: (vectors, ms per question)."""
    vecs, ms = np.zeros((len(c.queries), enc.dim), dtype=np.float32), []
    bar = Progress("encode questions", len(c.queries), "q")
    for i, text in enumerate(c.queries.values()):
        t0 = time.perf_counter()
        vecs[i] = enc.encode([text])[0]
        ms.append((time.perf_counter() - t0) * 1000)
        bar.add()
    return vecs, ms


def baseline_dense(enc: Encoder, c: Collection, qvecs: np.ndarray, encode_ms: list[float],
                   depth: int) -> tuple[dict[str, list[str]], float, list[float]]:
    """Whole documents, exact inner product: (run, docs encoded per second, ms per query).

    The vectors are cached under bench-results/ (keyed by model and texts); the rate is
    the one measured when they were encoded."""
    ids = list(c.docs)
    texts = [f"{t} {x}".strip() for t, x in c.docs.values()]
    path = CACHE / f"baseline-{cache_key(enc.model_id, ids, texts)}.npz"
    if path.exists():
        with np.load(path) as cached:
            vecs, rate = cached["vecs"], float(cached["rate"])
        print(f"    baseline vectors from {path.name}", flush=True)
    else:
        vecs = np.zeros((len(texts), enc.dim), dtype=np.float32)
        bar = Progress("baseline encode", len(texts), "docs")
        for part in in_batches(len(texts), 256):
            vecs[part.start:part.stop] = enc.encode(texts[part.start:part.stop])
            bar.add(len(part))
        rate = len(texts) / (time.perf_counter() - bar.started)
        CACHE.mkdir(parents=True, exist_ok=True)
        np.savez(path, vecs=vecs, rate=rate)
    index = faiss.IndexFlatIP(enc.dim)
    index.add(vecs)
    run, ms = {}, []
    for (q, vec), enc_ms in zip(zip(c.queries, qvecs, strict=True), encode_ms, strict=True):
        t0 = time.perf_counter()
        _, found = index.search(vec[None, :], min(depth, len(ids)))
        ms.append(enc_ms + (time.perf_counter() - t0) * 1000)
        run[q] = [ids[i] for i in found[0] if i >= 0]
    return run, rate, ms


def pipeline_shards(enc: Encoder, c: Collection) -> tuple[list[Shard], float]:
    """The corpus through the services' chunker, embed_sets and Shard: (shards, docs/s of
    chunking and embedding; cached under bench-results/ like the baseline's)."""
    chunking, retrieval = ChunkingSettings(), RetrievalSettings()
    chunker = DocumentChunker(enc.tokenizer, chunking.max_tokens, chunking.overlap_tokens)
    shards = [Shard(enc.model_id, enc.dim, retrieval.index_config(), retrieval.filter_strategy,
                    lexical=True) for _ in range(SHARDS)]
    ids = list(c.docs)
    code = [(ROOT / f).read_text() for f in PIPELINE_CODE]
    key = cache_key(enc.model_id, code, c.docs, chunking.max_tokens,
                    chunking.overlap_tokens)
    path = CACHE / f"pipeline-{key}.jsonl"
    if path.exists():
        print(f"    embedded chunks from {path.name}", flush=True)
        lines = path.read_bytes().splitlines()
        rate = float(lines[0])
        embedded = [decode(EmbeddedChunkSet, line) for line in lines[1:]]
    else:
        embedded = []
        bar = Progress("pipeline chunk+embed", len(ids), "docs")
        for part in in_batches(len(ids), 64):
            sets = [chunker.chunk(RedactedDocument(
                doc_id=d, version=1, title=c.docs[d][0], text=c.docs[d][1], source="bench",
                domain="beir", event_time=0, ingest_time=0)) for d in ids[part.start:part.stop]]
            embedded += embed_sets(enc, sets, 2048)
            bar.add(len(part))
        rate = len(ids) / (time.perf_counter() - bar.started)
        CACHE.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\n".join([str(rate).encode(), *(encode(s) for s in embedded)]))
    for s in embedded:
        shards[zlib.crc32(s.doc_id.encode()) % SHARDS].apply(s)
    return shards, rate


def pipeline_search(shards: Sequence[Shard], c: Collection, qvecs: np.ndarray,
                    encode_ms: list[float], chunk_k: int,
                    fusion: Fusion | None) -> tuple[dict[str, list[str]], list[float]]:
    """Dense (fusion None) or hybrid, merged as inference's gather merges: (run, ms)."""
    run, ms = {}, []
    for (q, text), vec, enc_ms in zip(c.queries.items(), qvecs, encode_ms, strict=True):
        t0 = time.perf_counter()
        ask = text if fusion is not None else ""
        answers = [ShardAnswer(p, tuple(s.search(vec, chunk_k, Filters(access=EVERYTHING), ask)))
                   for p, s in enumerate(shards)]
        hits = merge_hits(answers, chunk_k, fusion)
        run[q] = documents_by_best_chunk((h.doc_id, h.score) for h in hits)
        ms.append(enc_ms + (time.perf_counter() - t0) * 1000)
    return run, ms


def pipeline_bm25(shards: Sequence[Shard], c: Collection,
                  chunk_k: int) -> tuple[dict[str, list[str]], list[float]]:
    run, ms = {}, []
    for q, text in c.queries.items():
        t0 = time.perf_counter()
        hits = []
        for s in shards:
            assert s.lexical is not None
            hits += [(s.columns.hits[slot].doc_id, score)  # type: ignore[union-attr]
                     for score, slot in s.lexical.search(text, chunk_k, s.columns.size)]
        run[q] = documents_by_best_chunk(hits)
        ms.append((time.perf_counter() - t0) * 1000)
    return run, ms


def bm25s_baseline(c: Collection, depth: int) -> tuple[dict[str, list[str]], float]:
    """bm25s over whole documents with the shard index's tokens: (run, docs indexed/s)."""
    import bm25s

    ids = list(c.docs)
    started = time.perf_counter()
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    retriever.index([terms(f"{t} {x}") for t, x in c.docs.values()], show_progress=False)
    rate = len(ids) / (time.perf_counter() - started)
    found, _ = retriever.retrieve([terms(q) or ["-"] for q in c.queries.values()],
                                  k=min(depth, len(ids)), show_progress=False)
    return {q: [ids[i] for i in row] for q, row in zip(c.queries, found, strict=True)}, rate


def fusions(sweep: bool) -> dict[str, Fusion]:
    default = InferenceSettings().fusion()
    out = {"hybrid": default}
    if not sweep:
        return out
    for f in (Fusion("rrf", 60), Fusion("rrf", 10), *(Fusion("normalised", lexical_weight=w)
                                                    for w in (0.05, 0.1, 0.2, 0.3, 0.5))):
        if f != default:
            out[f"hybrid {f.method} k={f.rrf_k} w={f.dense_weight:g}/{f.lexical_weight:g}"] = f
    return out


def local_rows(c: Collection, enc: Encoder, model: str, qvecs: np.ndarray,
               encode_ms: list[float], args: argparse.Namespace) -> list[Row]:
    print("  pipeline (the services' code, no broker) ...", flush=True)
    shards, rate = pipeline_shards(enc, c)
    chunks = sum(len(s) for s in shards) / len(c.docs)
    rows = []
    for name, fusion in {"dense": None, **fusions(args.sweep)}.items():
        run, ms = pipeline_search(shards, c, qvecs, encode_ms, args.chunk_top_k, fusion)
        rows.append(Row(c.name, model, f"pipeline {name}", score(c, run), rate, ms,
                        f"{chunks:.2f} chunks/doc" if fusion is None else ""))
    rows.append(Row(c.name, model, "pipeline hybrid + reranker", note=(
        "n/a (the reranker runs in the mesh: --mode mesh)" if args.reranker else NO_RERANKER)))
    run, ms = pipeline_bm25(shards, c, args.chunk_top_k)
    rows.append(Row(c.name, model, "pipeline bm25", score(c, run), None, ms,
                    "latency without encoding"))
    return rows


# --- through the mesh ------------------------------------------------------------------


def reranker_env(path: Path | None) -> tuple[dict[str, str], str]:
    """(mesh environment, why not) for the reranker: only when this build has the setting."""
    if path is None:
        return {}, NO_RERANKER
    if "reranker_path" not in InferenceSettings.model_fields:
        return {}, "n/a (this build has no reranker stage)"
    return {"STREAMRAG_INFERENCE_RERANKER_PATH": str(path)}, ""


def mesh_rows(c: Collection, qvecs: np.ndarray, encode_ms: list[float],
              args: argparse.Namespace) -> list[Row]:
    from services.cli.mesh import isolated

    env, why_not = reranker_env(args.reranker)
    retrieve = "mesh hybrid + reranker" if env else "mesh Retrieve (defaults)"
    mesh_env = {"STREAMRAG_INFERENCE_MAX_TOP_K": "1000", **env}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        run_dir = Path(tmp)

        def leftovers(names: list[str]) -> None:
            if names:
                print(f"    stopped what the mesh left running: {', '.join(names)}", flush=True)

        with stopped_on_exit(run_dir, leftovers):
            print("  starting an isolated mesh (embedded broker, anvil, every service) ...",
                  flush=True)
            t0 = time.perf_counter()
            with isolated(run_dir, ANVIL,
                          env=mesh_env) as mesh:
                print(f"    ready in {time.perf_counter() - t0:.0f}s", flush=True)
                out = asyncio.run(_through_mesh(mesh, c, args.chunk_top_k, qvecs, encode_ms,
                                                reranked=bool(env)))
            print("    mesh stopped", flush=True)
    note = f"{out['lost']} docs lost" if out["lost"] else ""
    rate = out["searchable_docs_per_s"]
    rows = [Row(c.name, MODEL_ID, "mesh dense", score(c, out["dense"]), rate,
                out["dense_ms"], note),
            Row(c.name, MODEL_ID, "mesh hybrid", score(c, out["hybrid"]), rate,
                out["hybrid_ms"], note),
            Row(c.name, MODEL_ID, retrieve, score(c, out["retrieve"]), rate,
                out["retrieve_ms"], f"gRPC; {out['partial']} partial" if out["partial"]
                else "gRPC")]
    if not env:
        rows.append(Row(c.name, MODEL_ID, "mesh hybrid + reranker", note=why_not))
    return rows


async def _shard_runs(mesh: Any, c: Collection, chunk_k: int, qvecs: np.ndarray,
                      encode_ms: list[float]) -> dict[str, Any]:
    """Dense and default-hybrid runs straight from the mesh's shards (inference's client)."""
    from services.inference.search.client import SearchClient
    from services.inference.search.scatter import SearchQuery
    from shared.contract.access import Access
    from shared.encoder.model import MODEL_DIM
    from shared.settings import KafkaSettings

    client = SearchClient(KafkaSettings(bootstrap=mesh.bootstrap), client_id="bench-quality")
    await client.start()
    out: dict[str, Any] = {"dense": {}, "hybrid": {}, "dense_ms": [], "hybrid_ms": []}
    fusion = InferenceSettings().fusion()
    bar = Progress("mesh shards dense+hybrid", len(c.queries), "q")
    try:
        for (q, text), vec, enc_ms in zip(c.queries.items(), qvecs, encode_ms, strict=True):
            for name, ask in (("dense", ""), ("hybrid", text)):
                t0 = time.perf_counter()
                result = await client.search(SearchQuery(
                    vec, MODEL_ID, MODEL_DIM, chunk_k, text=ask, fusion=fusion,
                    access=Access.everything()), 30)
                out[f"{name}_ms"].append(enc_ms + (time.perf_counter() - t0) * 1000)
                out[name][q] = documents_by_best_chunk((h.doc_id, h.score) for h in result.hits)
            bar.add()
    finally:
        await client.stop()
    return out


async def _through_mesh(mesh: Any, c: Collection, chunk_k: int, qvecs: np.ndarray,
                        encode_ms: list[float], reranked: bool) -> dict[str, Any]:
    import grpc
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from shared.rpc.streamrag.v1 import inference_pb2 as pb
    from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

    seen: dict[str, float] = {}
    consumer = AIOKafkaConsumer("chunks.embedded.v1", bootstrap_servers=mesh.bootstrap,
                                group_id=None, auto_offset_reset="latest", fetch_max_wait_ms=10)
    await consumer.start()

    async def watch() -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=100)
            for records in batch.values():
                for r in records:
                    if r.key:
                        seen.setdefault(r.key.decode(), time.perf_counter())

    watcher = asyncio.create_task(watch())
    producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap, linger_ms=5)
    await producer.start()
    started = time.perf_counter()
    bar = Progress("produce", len(c.docs), "docs")
    for doc_id, (title, text) in c.docs.items():
        value = json.dumps({"id": doc_id, "title": title, "text": text, "source": "beir",
                            "domain": "beir"}).encode()
        await producer.send("docs.raw.v1", value, key=doc_id.encode())
        bar.add()
    await producer.flush()
    await producer.stop()
    bar = Progress("mesh embedded", len(c.docs), "docs", every_s=15)
    bar.started = started
    last_change = time.monotonic()
    while (n := sum(d in seen for d in c.docs)) < len(c.docs):
        if n != bar.done:
            bar.add(n - bar.done)
            last_change = time.monotonic()
        if time.monotonic() - last_change > 180:
            print(f"    {len(c.docs) - n} documents never reached chunks.embedded.v1",
                  flush=True)
            break
        await asyncio.sleep(0.2)
    watcher.cancel()
    await consumer.stop()
    out: dict[str, Any] = {"retrieve": {}, "retrieve_ms": [], "partial": 0}
    async with grpc.aio.insecure_channel(mesh.grpc_target, options=[
            ("grpc.max_receive_message_length", 64 << 20)]) as channel:
        stub = pb_grpc.InferenceStub(channel)
        last = max((d for d in c.docs if d in seen), key=lambda d: seen[d])
        await _until_searchable(stub, pb, last, c.docs[last])
        searchable_s = time.perf_counter() - started
        print(f"    searchable: {len(seen)} docs in {searchable_s:.0f}s "
              f"({len(seen) / searchable_s:.1f} docs/s)", flush=True)
        bar = Progress("Retrieve", len(c.queries), "q")
        for q, text in c.queries.items():
            t0 = time.perf_counter()
            resp = await stub.Retrieve(pb.RetrieveRequest(question=text, top_k=chunk_k),
                                       timeout=60)
            out["retrieve_ms"].append((time.perf_counter() - t0) * 1000)
            out["partial"] += resp.partial
            out["retrieve"][q] = (documents_in_order(h.doc_id for h in resp.chunks) if reranked
                                  else documents_by_best_chunk((h.doc_id, h.score)
                                                               for h in resp.chunks))
            bar.add()
    out.update(await _shard_runs(mesh, c, chunk_k, qvecs, encode_ms))
    out.update(searchable_docs_per_s=len(seen) / searchable_s, lost=len(c.docs) - len(seen))
    return out


async def _until_searchable(stub: Any, pb: Any, doc_id: str, doc: tuple[str, str],
                            timeout_s: float = 120) -> None:
    """The last document to arrive comes back for its own title (it is indexed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        resp = await stub.Retrieve(pb.RetrieveRequest(question=doc[0] or doc[1][:200],
                                                      top_k=50), timeout=30)
        if any(h.doc_id == doc_id for h in resp.chunks):
            return
        await asyncio.sleep(0.2)
    print(f"    {doc_id} not searchable after {timeout_s}s; asking anyway", flush=True)


# --- report ----------------------------------------------------------------------------


def table(rows: list[Row], split: str = "all") -> str:
    """Markdown: every row beside its collection's and model's in-process dense baseline."""
    base = {(r.collection, r.model): r for r in rows if r.config == BASELINE}
    head = ("| collection | model | configuration | nDCG@10 | dNDCG@10 | ratio | Recall@10 "
            "| Recall@100 | ingest docs/s (x base) | p50 ms | p99 ms | note |")
    out = [head, "|" + "---|" * 12]
    for r in rows:
        s = r.summary()
        model = Path(r.model).name
        if r.scores is None:
            out.append(f"| {r.collection} | {model} | {r.config} | {r.note} | | | | | | | | |")
            continue
        m = r.scores[split]
        b = base.get((r.collection, r.model)) or base.get((r.collection, MODEL_ID))
        bn = b.scores[split]["NDCG@10"] if b and b.scores else 0.0
        rate = ""
        if r.ingest_docs_s is not None:
            rate = f"{r.ingest_docs_s:.1f}"
            if b and b.ingest_docs_s and r is not b:
                rate += f" ({r.ingest_docs_s / b.ingest_docs_s:.2f}x)"
        lat = (f"{s['p50_ms']:.1f} | {s['p99_ms']:.1f}" if s["p50_ms"] is not None
               else " | ")
        out.append(f"| {r.collection} | {model} | {r.config} | {m['NDCG@10']:.4f} "
                   f"| {m['NDCG@10'] - bn:+.4f} | {m['NDCG@10'] / bn if bn else 0:.3f} "
                   f"| {m['Recall@10']:.4f} | {m['Recall@100']:.4f} | {rate} | {lat} "
                   f"| {r.note} |")
    return "\n".join(out)


def collection_rows(path: Path, args: argparse.Namespace) -> list[Row]:
    c = load(path, args.docs, args.queries)
    print(f"\n{c.name}: {len(c.docs)} documents ({c.empty} empty ones left out), "
          f"{len(c.queries)} judged queries", flush=True)
    rows: list[Row] = []
    default_q: tuple[np.ndarray, list[float]] | None = None
    for model in args.model or [None]:
        enc = Encoder(model, model_id=str(model) if model else MODEL_ID, threads=args.threads)
        name = enc.model_id
        print(f"  model {name}", flush=True)
        qvecs, encode_ms = encode_queries(enc, c)
        if model is None or name == MODEL_ID:
            default_q = (qvecs, encode_ms)
        print("  in-process dense baseline ...", flush=True)
        run, rate, ms = baseline_dense(enc, c, qvecs, encode_ms, 100)
        rows.append(Row(c.name, name, BASELINE, score(c, run), rate, ms))
        if args.mode in ("local", "both"):
            rows += local_rows(c, enc, name, qvecs, encode_ms, args)
        del enc
    if args.mode in ("local", "both"):
        run, rate = bm25s_baseline(c, 100)
        rows.append(Row(c.name, "bm25s", "in-process bm25s", score(c, run), rate))
    if args.mode in ("mesh", "both"):
        if default_q is None:
            print("  mesh skipped: it runs the default model, which --model left out")
        else:
            rows += mesh_rows(c, *default_q, args)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_quality", description=__doc__.splitlines()[1])
    ap.add_argument("beir_dirs", type=Path, nargs="+")
    ap.add_argument("--docs", type=int, default=None, help="documents kept (default: all)")
    ap.add_argument("--queries", type=int, default=None, help="judged queries (default: all)")
    ap.add_argument("--mode", choices=("local", "mesh", "both"), default="both")
    ap.add_argument("--model", type=Path, action="append", default=None,
                    help="a sentence-transformers folder (repeat; default: the shipped model)")
    ap.add_argument("--reranker", type=Path, default=os.environ.get(
        "STREAMRAG_INFERENCE_RERANKER_PATH") or None, help="cross-encoder folder (mesh mode)")
    ap.add_argument("--chunk-top-k", type=int, default=300,
                    help="chunks asked per query (enough to rank 100 documents)")
    ap.add_argument("--sweep", action="store_true", help="also other fusion settings")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads in this process (0: torch's default, one per core)")
    ap.add_argument("--out", type=Path, default=RESULTS / "quality.json")
    ap.add_argument("--splits", action="store_true",
                    help="also print the table for even and odd queries")
    args = ap.parse_args()
    rows: list[Row] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(args.beir_dirs):
        new = collection_rows(path, args)
        rows += new
        if i < len(args.beir_dirs) - 1:  # a long run shows each collection when it is done
            print(f"\n{new[0].collection}, all judged queries:\n" + table(new), flush=True)
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                        "rows": [r.summary() for r in rows]}, indent=2))
    print("\nall judged queries:\n" + table(rows))
    if args.splits:
        for split in ("even (tune)", "odd (held out)"):
            print(f"\nqueries {split}:\n" + table(rows, split))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
