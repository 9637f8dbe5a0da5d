"""Ingest speed: bulk docs/s end to end per bring-up, beside the raw model rate of the encoder.

    scripts/bench_ingest --docs 2000                      # both bring-ups (the default)
    scripts/bench_ingest --corpus $BEIR/scifact-train --docs 300
    scripts/bench_ingest --modes onebox --env STREAMRAG_EMBEDDING_ENCODER_THREADS=1
    scripts/bench_ingest --batching --docs 24 --rounds 4  # the embedding batching policies

Bring-ups (default): for each of `onebox` (every service in one worker, the default of
`streamrag up`) and `processes` (one process per service) it starts its own mesh
(redaction on, as always), produces --docs documents at once with a plain aiokafka
producer and counts until every one is on chunks.embedded.v1 and gRPC Query (source
filter) cites the last: bulk docs/s end to end. Beside it, measured in the same run with
no mesh running: the raw model rate, the same documents chunked in-process and encoded
by the encoder alone (the embedding stage's runtime and threads) in the batches the
service forms with everything pending; the ratio is end to end / raw (target >= 0.8) and
the issue's absolute target is >= 7.9 docs/s (Pathway on this corpus). Also the mesh's
summed peak RSS (VmHWM of every process) after the burst, and where the time went per
stage. Documents: a BEIR corpus (--corpus: title + text, as scripts/bench_quality
produces them; SciFact abstracts are the issue's kind: 1-2 chunks of 254 tokens) or, without
one, short synthetic incident reports.

Batching (--batching): compares, in one run on one mesh, the embedding worker with the
current batching ("wait-free", shared/batching), with the adaptive wait it replaced
("adaptive wait", rebuilt in scripts/benchlib/adaptive_wait.py: the baseline) and with batch
size 1 (STREAMRAG_EMBEDDING_BATCH_MAX_DOCS=1). The mesh runs every service but embedding;
the bench starts one embedding worker at a time, in `--rounds` rounds whose order rotates,
so machine noise falls on all of them alike. It measures:
  (a) raw model throughput: the same documents chunked in-process and encoded in the batches
      the service would form with everything pending (the compute ceiling; the adaptive
      wait cuts the same batches when everything is pending);
  (b) end-to-end throughput: N documents produced at once with a plain aiokafka producer,
      until every one is on chunks.embedded.v1 and gRPC Query (source filter) cites the last;
  (c) produce->embedded latency p50/p95/p99 with documents paced at one rate for every
      configuration (half of the first burst's throughput, or --paced-rate);
plus where the time goes: per-stage delays from the Kafka timestamps of each topic (the
embedding hop is chunks.v1 -> chunks.embedded.v1), and the in-process redaction rate.
Prints a table with the ratios to the adaptive wait. Writes bench-results/ingest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from scripts.benchlib.hops import STAGES, first_stamps, hop_delays
from scripts.benchlib.paths import ANVIL, RESULTS
from scripts.benchlib.procs import cpu_by_group, memory_gib
from scripts.benchlib.stats import summary
from services.chunking.documents import DocumentChunker
from services.chunking.settings import ChunkingSettings
from services.cli.mesh import START_ORDER, Endpoints, isolated
from services.cli.procs import Child, spawn, stop
from services.embedding.settings import EmbeddingSettings
from services.embedding.vectors import embed_sets, longest_chunk
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from shared.batching.queue import RequestQueue
from shared.contract.records import ChunkSet, RedactedDocument
from shared.encoder.runtime import SentenceEncoder, load_encoder
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc

BATCH_ONE = {"STREAMRAG_EMBEDDING_BATCH_MAX_DOCS": "1"}
BASELINE = "adaptive wait"
# name -> the embedding worker's `python -m` arguments
WORKERS = {"wait-free": ["services.embedding"],
           BASELINE: ["scripts.benchlib.adaptive_wait", "embedding"],
           "batch size 1": ["services.embedding"]}
EMBED_HOP = "chunks.v1 -> chunks.embedded.v1"
SERVICES = ("checkout", "billing", "search", "ledger", "payments", "auth", "catalog")
CAUSES = ("an expired TLS certificate on the gateway", "a full disk on a database replica",
          "a bad feature flag rollout", "connection pool exhaustion after a deploy",
          "a DNS change that dropped the internal zone", "a slow query on the orders table")


def doc_text(i: int) -> str:
    svc, cause = SERVICES[i % len(SERVICES)], CAUSES[i % len(CAUSES)]
    return (f"Incident {i}: at 14:{i % 60:02d} UTC the {svc} service started returning HTTP 502 "
            f"for about {3 + i % 17} minutes. The on-call engineer traced it to {cause}, "
            f"rolled back and added an alert. Follow-up {i}: review the runbook for {svc}, add "
            "a canary stage for configuration changes and rehearse the failover twice a "
            "quarter so recovery takes minutes, not hours.")


# --- in-process ceilings -----------------------------------------------------------------

# (title, text) per document index when --corpus is given; else the synthetic doc_text(i).
CORPUS: list[tuple[str, str]] = []


def document(i: int) -> tuple[str, str]:
    return CORPUS[i % len(CORPUS)] if CORPUS else ("", doc_text(i))


def load_corpus(path: Path, n: int) -> list[tuple[str, str]]:
    """The first n documents of a BEIR corpus.jsonl: (title, text)."""
    out = []
    with (path / "corpus.jsonl").open() as f:
        for line in f:
            obj = json.loads(line)
            out.append((obj.get("title", ""), obj["text"]))
            if len(out) == n:
                break
    return out


def embedding_encoder() -> SentenceEncoder:
    """The encoder as the embedding stage loads it (its runtime, device, threads)."""
    s = EmbeddingSettings()
    return load_encoder(s.encoder_runtime, s.device, s.encoder_threads, s.model_cache_dir,
                        workers=s.encoder_workers)


def chunk_sets(encoder: SentenceEncoder, n: int) -> list[ChunkSet]:
    chunker = DocumentChunker(encoder.tokenizer, ChunkingSettings().max_tokens,
                              ChunkingSettings().overlap_tokens)
    return [chunker.chunk(RedactedDocument(doc_id=f"raw-{i}", version=1, title=document(i)[0],
                                           text=document(i)[1], source="bench",
                                           event_time=0, ingest_time=0))
            for i in range(n)]


def raw_throughput(encoder: SentenceEncoder, sets: list[ChunkSet], env: dict[str, str],
                   ) -> float:
    """Docs/s of the model alone, in the batches the service forms when all are pending."""
    fields: dict[str, Any] = {k.removeprefix("STREAMRAG_EMBEDDING_").lower(): v
                              for k, v in env.items()}
    settings = EmbeddingSettings(**fields)
    queue: RequestQueue[ChunkSet] = RequestQueue(settings.limits(), len(sets))
    for s in sets:
        queue.push(s, len(s.chunks), longest_chunk(s))
    started = time.perf_counter()
    while len(queue):
        batch = [r.payload for r in queue.cut(0.0).batch]
        embed_sets(encoder, batch, settings.forward_tokens)
    return len(sets) / (time.perf_counter() - started)


def redaction_rate(n: int) -> float:
    from shared.contract.records import Document
    red = Redactor(RedactionSettings())
    docs = [Document(doc_id=f"r{i}", version=1, text=doc_text(i), source="bench",
                     event_time=0, ingest_time=0) for i in range(n)]
    red.redact_documents(docs[:2])  # warm-up
    started = time.perf_counter()
    red.redact_documents(docs)
    return n / (time.perf_counter() - started)


# --- through the mesh --------------------------------------------------------------------

class Watcher:
    """Sees chunks.embedded.v1 as it fills: arrival time per doc id (local clock)."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = AIOKafkaConsumer("chunks.embedded.v1", bootstrap_servers=bootstrap,
                                         group_id=None, auto_offset_reset="latest",
                                         fetch_max_wait_ms=10)
        self.seen: dict[str, float] = {}

    async def run(self) -> None:
        await self.consumer.start()
        try:
            while True:
                batch = await self.consumer.getmany(timeout_ms=100)
                now = time.time()
                for records in batch.values():
                    for r in records:
                        if r.key:
                            self.seen.setdefault(r.key.decode(), now)
        finally:
            await self.consumer.stop()

    async def wait_for(self, ids: list[str], label: str, stall_s: float = 120,
                       ) -> tuple[float, list[str]]:
        """Last arrival time, and the ids that never came (no progress for `stall_s`)."""
        last_n, last_change = -1, time.monotonic()
        while (n := sum(i in self.seen for i in ids)) < len(ids):
            if n != last_n:
                if n // 10 != last_n // 10:
                    print(f"    {label}: {n}/{len(ids)} embedded", flush=True)
                last_n, last_change = n, time.monotonic()
            if time.monotonic() - last_change > stall_s:
                print(f"    {label}: {len(ids) - n} documents never arrived", flush=True)
                break
            await asyncio.sleep(0.2)
        got = [self.seen[i] for i in ids if i in self.seen]
        return (max(got) if got else float("nan")), [i for i in ids if i not in self.seen]

    def last_arrived(self, ids: list[str]) -> str:
        return max((i for i in ids if i in self.seen), key=lambda i: self.seen[i])


# Documents' source: one per run (as a connector would send them), or with
# --source-per-doc each document its own (the earlier workload: every source then has its
# own event-time clock and statistics, which ingest summarises every 2 s).
SOURCE_PER_DOC = False
SOURCE_INDEX: dict[str, int] = {}  # doc id -> document index, for the searchable check


def source_of(doc_id: str) -> str:
    return doc_id if SOURCE_PER_DOC else "bench-" + doc_id.partition("-")[0]


def doc_value(doc_id: str, i: int) -> bytes:
    title, text = document(i)
    SOURCE_INDEX[doc_id] = i
    return json.dumps({"id": doc_id, "title": title, "text": text,
                       "source": source_of(doc_id), "domain": "bench"}).encode()


async def searchable(target: str, doc_id: str, timeout_s: float = 120) -> float:
    """When gRPC Query (filtered to the document's source, asking the document's own
    opening words) first cites the document (local clock)."""
    title, text = document(SOURCE_INDEX.get(doc_id, 0))
    question = " ".join((title or text).split()[:30])
    deadline = time.monotonic() + timeout_s
    async with grpc.aio.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        while time.monotonic() < deadline:
            resp = await stub.Query(inference_pb2.QueryRequest(
                question=question, source=source_of(doc_id), top_k=20,
                answer_mode="extractive"), timeout=10)
            if any(c.doc_id == doc_id for c in resp.citations):
                return time.time()
            await asyncio.sleep(0.02)
    raise TimeoutError(f"{doc_id} not searchable after {timeout_s}s")


async def burst(mesh: Endpoints, watcher: Watcher, tag: str, n: int) -> dict[str, Any]:
    """(b): n documents at once; throughput until all are embedded and the last is cited."""
    ids = [f"{tag}-burst-{i}" for i in range(n)]
    producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap, linger_ms=5)
    await producer.start()
    started = time.time()
    try:
        for i, doc_id in enumerate(ids):
            await producer.send("docs.raw.v1", doc_value(doc_id, i), key=doc_id.encode())
        await producer.flush()
    finally:
        await producer.stop()
    embedded, lost = await watcher.wait_for(ids, f"{tag} burst")
    cited = await searchable(mesh.grpc_target, watcher.last_arrived(ids))
    # After a stall (lost documents) the gRPC check starts late: count to the last arrival.
    end = embedded if lost else max(embedded, cited)
    return {"docs": n, "lost": lost, "docs_per_s": (n - len(lost)) / (end - started),
            "embedded_s": embedded - started, "searchable_s": cited - started, "ids": ids}


async def paced(mesh: Endpoints, watcher: Watcher, tag: str, n: int, rate: float,
                ) -> dict[str, Any]:
    """(c): n documents at `rate` docs/s; produce->embedded latency per doc."""
    ids = [f"{tag}-paced-{i}" for i in range(n)]
    sent: dict[str, float] = {}
    producer = AIOKafkaProducer(bootstrap_servers=mesh.bootstrap)
    await producer.start()
    try:
        start = time.monotonic()
        for i, doc_id in enumerate(ids):
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            sent[doc_id] = time.time()
            await producer.send_and_wait("docs.raw.v1", doc_value(doc_id, 10_000 + i),
                                         key=doc_id.encode())
    finally:
        await producer.stop()
    _, lost = await watcher.wait_for(ids, f"{tag} paced")
    last = watcher.last_arrived(ids)
    last_cited = await searchable(mesh.grpc_target, last) - sent[last]
    lat = [(watcher.seen[i] - sent[i]) * 1000 for i in ids if i in watcher.seen]
    return {"rate": rate, "lost": lost, "latency_ms": summary(lat), "latencies": lat,
            "last_searchable_ms": last_cited * 1000, "ids": ids}


async def stage_times(bootstrap: str, ids: set[str]) -> dict[str, Any]:
    """Per-stage delay (ms) between the Kafka timestamps of consecutive topics, per doc."""
    stamps = await first_stamps(bootstrap, ids)
    out: dict[str, Any] = {hop: summary(ms) for hop, ms in hop_delays(stamps, ids).items()}
    # For a document that never arrived: the last topic it reached.
    out["lost_after"] = {k: max((t for t in STAGES if k in stamps[t]), key=STAGES.index,
                                default="(never produced)")
                         for k in ids if k not in stamps["chunks.embedded.v1"]}
    return out


def start_embedding(mesh: Endpoints, name: str, env: dict[str, str]) -> Child:
    """An embedding worker for configuration `name` on the mesh's broker."""
    child_env = {"STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
                 "STREAMRAG_DATA_DIR": str(mesh.run_dir / "data"), **env}
    return spawn(f"embedding-{name.replace(' ', '-')}", [sys.executable, "-m", *WORKERS[name]],
                 mesh.run_dir, child_env)


async def measure(mesh: Endpoints, tag: str, docs: int, paced_docs: int,
                  rate: float | None) -> dict[str, Any]:
    watcher = Watcher(mesh.bootstrap)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.sleep(1)
        warm = f"{tag}-warm"  # the worker is up and owns its partitions before timing
        await burst(mesh, watcher, warm, 8)
        print(f"  {tag}: (b) burst of {docs} documents", flush=True)
        b = await burst(mesh, watcher, tag, docs)
        rate = rate or b["docs_per_s"] / 2
        print(f"  {tag}: (b) {b['docs_per_s']:.2f} docs/s; (c) {paced_docs} documents at "
              f"{rate:.2f} docs/s", flush=True)
        c = await paced(mesh, watcher, tag, paced_docs, rate)
        return {"burst": b, "paced": c,
                "stages_burst": await stage_times(mesh.bootstrap, set(b["ids"])),
                "stages_paced": await stage_times(mesh.bootstrap, set(c["ids"]))}
    finally:
        task.cancel()


def combined(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration over its rounds: median burst rate, pooled paced latencies."""
    lat = [x for r in rounds for x in r["paced"]["latencies"]]
    hop = {f"{part} {q}": statistics.median(r[f"stages_{part}"][EMBED_HOP][q] for r in rounds)
           for part in ("burst", "paced") for q in ("p50", "p99")}
    return {"docs_per_s": statistics.median(r["burst"]["docs_per_s"] for r in rounds),
            "docs_per_s_rounds": [r["burst"]["docs_per_s"] for r in rounds],
            "latency_ms": summary(lat),
            "last_searchable_ms": statistics.median(r["paced"]["last_searchable_ms"]
                                                    for r in rounds),
            "embed_hop_ms": hop,
            "lost": sum(len(r["burst"]["lost"]) + len(r["paced"]["lost"]) for r in rounds)}


def print_table(results: dict[str, Any]) -> None:
    names = list(results["runs"])
    comb = {n: combined(results["runs"][n]) for n in names}
    base = comb[BASELINE]
    print(f"\n{'measure':<48}" + "".join(f"{n:>14}" for n in names)
          + "".join(f"{n + ' / base':>22}" for n in names if n != BASELINE))
    Get = Callable[[dict[str, Any]], float]
    rows: list[tuple[str, Get]] = [
        ("(b) end-to-end throughput, docs/s (median)", lambda c: c["docs_per_s"])]

    def at(field: str, key: str) -> Get:
        return lambda c: float(c[field][key])
    for key in ("p50", "p95", "p99"):
        rows.append((f"(c) produce->embedded {key} ms (pooled)", at("latency_ms", key)))
    for key in ("burst p50", "burst p99", "paced p50", "paced p99"):
        rows.append((f"embedding hop {key} ms (median)", at("embed_hop_ms", key)))
    rows.append(("(c) last doc produce->gRPC-searchable ms", lambda c: c["last_searchable_ms"]))
    for label, get in rows:
        print(f"{label:<48}" + "".join(f"{get(comb[n]):14.1f}" for n in names)
              + "".join(f"{get(comb[n]) / get(base):21.2f}x" for n in names if n != BASELINE))
    print("(b) per round, docs/s: " + "; ".join(
        f"{n} {', '.join(f'{x:.2f}' for x in comb[n]['docs_per_s_rounds'])}" for n in names))
    print(f"(a) raw model throughput, docs/s: dynamic batches {results['raw']['dynamic']:.1f}, "
          f"batch size 1 {results['raw']['batch1']:.1f}; in-process redaction (Presidio) "
          f"{results['redaction_docs_per_s']:.1f} docs/s")
    lost = {n: comb[n]["lost"] for n in names if comb[n]["lost"]}
    if lost:
        print(f"LOST documents per configuration: {lost}")
    print(f"baseline: {BASELINE!r} (the batching before the unification), measured in this "
          "run on the same mesh, configurations interleaved; (c) at the same rate for all.")
    results["combined"] = comb


# --- bring-ups: one-process vs one process per service -----------------------------------

MODES = {"onebox": False, "processes": True}  # name -> isolated(processes=...)


async def bulk(mesh: Endpoints, tag: str, docs: int) -> dict[str, Any]:
    watcher = Watcher(mesh.bootstrap)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.sleep(1)
        await burst(mesh, watcher, f"{tag}-warm", 8)  # every stage has seen a document
        print(f"  {tag}: burst of {docs} documents", flush=True)
        before = cpu_by_group(mesh.run_dir)
        b = await burst(mesh, watcher, tag, docs)
        after = cpu_by_group(mesh.run_dir)
        b["cpu_s_per_doc"] = {name: (after[name] - before.get(name, 0.0)) / docs
                              for name in sorted(after)}
        b["stages"] = await stage_times(mesh.bootstrap, set(b.pop("ids")))
        return b
    finally:
        task.cancel()


def run_mode(mode: str, docs: int, run: str, env: dict[str, str]) -> dict[str, Any]:
    print(f"starting the mesh, {mode} {env or ''}...", flush=True)
    with tempfile.TemporaryDirectory() as tmp, \
            isolated(Path(tmp), ANVIL, env=env,
                     processes=MODES[mode]) as mesh:
        out = asyncio.run(bulk(mesh, f"{mode}{run}", docs))
        out["peak_rss_gib"] = memory_gib(mesh.run_dir)["peak"]
    print(f"  {mode}: {out['docs_per_s']:.2f} docs/s end to end, peak RSS "
          f"{out['peak_rss_gib']:.2f} GiB", flush=True)
    return out


def raw_rate(docs: int) -> dict[str, Any]:
    encoder = embedding_encoder()
    sets = chunk_sets(encoder, docs)
    raw_throughput(encoder, sets[:4], {})  # warm-up
    rate = raw_throughput(encoder, sets, {})
    chunks = [c for cs in sets for c in cs.chunks]
    return {"docs_per_s": rate, "runtime": encoder.runtime,
            "chunks_per_doc": len(chunks) / len(sets),
            "tokens_per_chunk": statistics.fmean(c.token_count for c in chunks)}


def print_modes(res: dict[str, Any]) -> None:
    raws = res["raw"]
    raw = statistics.median(r["docs_per_s"] for r in raws)
    print(f"\n{res['docs']} documents ({res['corpus']}; {raws[0]['chunks_per_doc']:.2f} "
          f"chunks of {raws[0]['tokens_per_chunk']:.0f} tokens each on average, "
          + ("each its own source" if res["args"].get("source_per_doc") else "one source")
          + "), redaction on"
          + (f"; services with {res['env']}" if res["env"] else ""))
    print(f"raw model rate (encoder alone, {raws[0]['runtime']}, the service's batches): "
          f"{raw:.2f} docs/s (median of " + ", ".join(f"{r['docs_per_s']:.2f}" for r in raws)
          + ")")
    print(f"{'bring-up':<12}{'docs/s':>10}{'/ raw':>8}{'lost':>6}{'peak RSS GiB':>14}   "
          "stage p50 ms (parsed, normalized, redacted, chunks, embedded)")
    for mode, out in res["modes"].items():
        hops = [out["stages"][f"{a} -> {b}"]["p50"] for a, b in zip(STAGES, STAGES[1:],
                                                                    strict=False)]
        print(f"{mode:<12}{out['docs_per_s']:>10.2f}{out['docs_per_s'] / raw:>7.2f}x"
              f"{len(out['lost']):>6}{out['peak_rss_gib']:>14.2f}   "
              + ", ".join(f"{h:.0f}" for h in hops))
    print("targets: end to end >= 0.8 x raw and >= 7.9 docs/s (Pathway, 2,000 "
          "documents); peak RSS 1.5 GiB one-process, 2.5 GiB multi-process")
    if res.get("before"):
        print(f"'<mode> before': the same bring-up with {res['before']} (same run)")
        print(f"{'bring-up':<12}{'docs/s':>10}{'before':>10}{'ratio':>8}")
        for mode, out in res["modes"].items():
            if (base := res["modes"].get(f"{mode} before")) is not None:
                print(f"{mode:<12}{out['docs_per_s']:>10.2f}{base['docs_per_s']:>10.2f}"
                      f"{out['docs_per_s'] / base['docs_per_s']:>7.3f}x")
    for mode, out in res["modes"].items():
        cpu = out.get("cpu_s_per_doc", {})
        print(f"CPU per document, {mode} (core-ms; the burst's total over its documents): "
              + ", ".join(f"{name} {sec * 1000:.0f}" for name, sec in
                          sorted(cpu.items(), key=lambda kv: -kv[1]))
              + f"; all {sum(cpu.values()) * 1000:.0f}")


def modes_main(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    env = dict(kv.split("=", 1) for kv in args.env)  # the meshes' settings; raw: defaults
    res: dict[str, Any] = {"env": env, "args": {**vars(args), "corpus": str(args.corpus)},
                           "docs": args.docs,
                           "corpus": str(args.corpus or "synthetic incident reports"),
                           "raw": [], "modes": {}}
    print(f"raw model rate on {args.docs} documents ...", flush=True)
    res["raw"].append(raw_rate(args.docs))
    before = dict(kv.split("=", 1) for kv in args.before)
    res["before"] = before
    for mode in args.modes:
        if before:  # the baseline bring-up first, then today's, in the same run
            res["modes"][f"{mode} before"] = run_mode(mode, args.docs, run + "b",
                                                      {**env, **before})
        res["modes"][mode] = run_mode(mode, args.docs, run, env)
    print("raw model rate again (the machine's load drifts) ...", flush=True)
    res["raw"].append(raw_rate(args.docs))
    print_modes(res)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_ingest", description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=None,
                    help="documents in the burst (default 2000; --batching: 60)")
    ap.add_argument("--corpus", type=Path, default=None,
                    help="a BEIR collection folder (corpus.jsonl); default: synthetic")
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    ap.add_argument("--source-per-doc", action="store_true",
                    help="every document its own source (default: one source per run)")
    ap.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE",
                    help="settings for the bring-ups' services (the raw rate keeps defaults)")
    ap.add_argument("--before", nargs="*", default=[], metavar="KEY=VALUE",
                    help="settings of a baseline bring-up run beside each mode, same run "
                         "('<mode> before'; the table gives the ratio)")
    ap.add_argument("--batching", action="store_true",
                    help="compare the embedding batching policies instead (one mesh)")
    ap.add_argument("--paced-docs", type=int, default=30, help="documents in the latency run")
    ap.add_argument("--paced-rate", type=float, default=None,
                    help="docs/s for (c) (default: half the first burst's throughput)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--configs", nargs="+", choices=list(WORKERS), default=list(WORKERS),
                    help=f"which to run; {BASELINE!r} always runs")
    ap.add_argument("--max-batch-tokens", type=int, default=None,
                    help="STREAMRAG_EMBEDDING_MAX_BATCH_TOKENS for the batched runs "
                         "(default: the service's)")
    args = ap.parse_args()
    args.docs = args.docs or (60 if args.batching else 2000)
    global SOURCE_PER_DOC
    SOURCE_PER_DOC = args.source_per_doc
    if args.corpus:
        CORPUS.extend(load_corpus(args.corpus, args.docs + 100))
    results = batching_main(args) if args.batching else modes_main(args)
    out_path = RESULTS / "ingest.json"
    out_path.parent.mkdir(exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out_path}")
    return 0


def batching_main(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    dynamic_env = ({} if args.max_batch_tokens is None else
                   {"STREAMRAG_EMBEDDING_MAX_BATCH_TOKENS": str(args.max_batch_tokens)})
    envs = {"wait-free": dynamic_env, BASELINE: dynamic_env, "batch size 1": BATCH_ONE}
    names = [n for n in WORKERS if n in args.configs or n == BASELINE]
    print("(a) in-process: chunk, then encode in the service's batches ...", flush=True)
    encoder = embedding_encoder()
    sets = chunk_sets(encoder, args.docs)
    raw_throughput(encoder, sets[:4], dynamic_env)  # warm-up
    results: dict[str, Any] = {
        "envs": {n: envs[n] for n in names}, "args": {**vars(args), "corpus": str(args.corpus)},
        "raw": {"dynamic": raw_throughput(encoder, sets, dynamic_env),
                "batch1": raw_throughput(encoder, sets, BATCH_ONE)},
        "chunks_per_doc": statistics.fmean(len(s.chunks) for s in sets),
        "tokens_per_doc": statistics.fmean(c.token_count for s in sets for c in s.chunks),
        "runs": {n: [] for n in names},
    }
    print(f"    dynamic {results['raw']['dynamic']:.1f} docs/s, batch 1 "
          f"{results['raw']['batch1']:.1f} docs/s", flush=True)
    print("in-process redaction rate ...", flush=True)
    results["redaction_docs_per_s"] = redaction_rate(min(args.docs, 40))
    del encoder
    print("starting the mesh (embedded broker, anvil, every service but embedding) ...",
          flush=True)
    rate = args.paced_rate
    services = tuple(n for n in START_ORDER if n != "embedding")
    with tempfile.TemporaryDirectory() as tmp, \
            isolated(Path(tmp), ANVIL,
                     services=services) as mesh:
        for r in range(args.rounds):
            k = r % len(names)  # rotate the order every round
            for name in names[k:] + names[:k]:
                print(f"round {r + 1}: embedding worker with {name} ({envs[name]})", flush=True)
                worker = start_embedding(mesh, name, envs[name])
                try:
                    tag = f"{name.split()[0][:4]}{r}{run}"
                    out = asyncio.run(measure(mesh, tag, args.docs, args.paced_docs, rate))
                finally:
                    stop([worker], 15)
                rate = rate or out["paced"]["rate"]  # one pace for every configuration
                for part in ("burst", "paced"):
                    out[part].pop("ids")
                results["runs"][name].append(out)
    print_table(results)
    for rounds in results["runs"].values():
        for out in rounds:
            out["paced"].pop("latencies")
    return results


if __name__ == "__main__":
    sys.exit(main())
