"""Freshness, query latency, idle CPU, memory and start-up of the embedded mesh, per bring-up.

    scripts/bench_latency                       # both bring-ups, one after the other
    scripts/bench_latency --modes onebox --docs 40
    scripts/bench_latency --modes onebox --rounds 3 \
        --before STREAMRAG_REDACTION_BATCH_WITHIN_S=0.05   # today vs an older setting

For each bring-up (`onebox`: every service in one worker process, the default of `streamrag
up`; `processes`: one process per service, as before: the baseline) it starts its own mesh
(embedded broker, anvil, the workers) on free ports and measures:
  start:     from starting the broker until inference is SERVING and every shard answers;
  idle CPU:  CPU time of every process of the mesh (broker and anvil included) over
             --idle-s seconds of no traffic, after --settle-s seconds of quiet, in cores;
  freshness: one document at a time (a --gap-s pause between them) produced with a plain
             aiokafka producer; gRPC Retrieve (filtered to its source) is polled until it
             returns it. One warm-up document goes first and is not counted (the first
             through a new mesh pays one-time costs; after the idle window it is the first
             after a quiet spell, which the run below measures on its own). Where the time
             goes per hop is read from the Kafka timestamps of
             each pipeline topic; the last hop (chunks.embedded.v1 -> queryable) is the rest.
             Then --idle-docs more after a quiet spell each (freshness when idle);
  query:     sequential gRPC Query calls (answer_mode extractive), and retrieval's share;
  burst:     --burst documents produced at once, one source; docs/s from the first send
             until Retrieve returns every one of them (throughput under load);
  memory:    RSS of all the mesh's processes after the run (now and peak, VmHWM), and
             per process (the table's last rows).
With --tracing, every bring-up runs three times: tracing off (the default, the baseline),
on with 1% of new traces sampled, and on at 100%, each exporting over OTLP to a receiver
in this process (scripts/benchlib/otlp.py, which only collects); the table adds the spans
received, so "off" shows 0.
With --before KEY=VALUE ..., every bring-up also runs as "<mode> before" with those
settings (the baseline, same run); --rounds N repeats every configuration N times in
rotating order, so the machine's noise falls on all alike: freshness and hop samples are
pooled over the rounds, the other figures are the median of the rounds.
In-process baselines (the compute floor): the same document through redaction, chunking,
embedding and a FAISS shard in one process; encode + search per query.
Prints a table with both bring-ups side by side and writes bench-results/latency.json.
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
from pathlib import Path
from typing import Any

import grpc
from aiokafka import AIOKafkaProducer

from scripts.benchlib.hops import first_stamps, hop_delays
from scripts.benchlib.otlp import Receiver
from scripts.benchlib.paths import ANVIL, RESULTS
from scripts.benchlib.procs import cpu_s, group_pids, memory_gib
from scripts.benchlib.stats import summary
from services.chunking.documents import DocumentChunker
from services.cli.mesh import isolated
from services.embedding.settings import EmbeddingSettings
from services.embedding.vectors import embed_sets
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from services.retrieval.columns import EVERYTHING
from services.retrieval.index import Filters, Shard
from shared.contract.records import Document
from shared.encoder.runtime import load_encoder
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc

TEXT = ("At {t} the checkout service {i} started returning HTTP 502 for card payments. "
        "The on-call engineer traced it to an expired TLS certificate on the payment gateway "
        "and rotated it; errors stopped four minutes later.")


def in_process_floor(docs: int) -> tuple[list[float], list[float]]:
    """Per-document redact+chunk+embed+index time, and per-query encode+search time."""
    embedding = EmbeddingSettings()  # the embedding stage's encoder runtime and threads
    enc = load_encoder(embedding.encoder_runtime, embedding.device, embedding.encoder_threads,
                       embedding.model_cache_dir)
    red = Redactor(RedactionSettings())
    chunker = DocumentChunker(enc.tokenizer, 254)
    shard = Shard(enc.model_id, enc.dim)
    ingest, query = [], []
    for i in range(docs):
        doc = Document(doc_id=f"b{i}", version=1, text=TEXT.format(t=time.time(), i=i),
                       source="bench", event_time=time.time(), ingest_time=time.time())
        t0 = time.perf_counter()
        (rdoc,) = red.redact_documents([doc])
        (embedded,) = embed_sets(enc, [chunker.chunk(rdoc)], 8192)
        shard.apply(embedded)
        ingest.append((time.perf_counter() - t0) * 1000)
    for i in range(docs):
        t0 = time.perf_counter()
        shard.search(enc.encode([f"why did checkout {i} fail"])[0], 5, Filters(access=EVERYTHING))
        query.append((time.perf_counter() - t0) * 1000)
    return ingest, query


MODES = {"onebox": False, "processes": True}  # name -> isolated(processes=...)


def idle_cpu(run_dir: Path, window_s: float) -> dict[str, float]:
    """Cores used per process group over `window_s` seconds, and in total."""
    groups = group_pids(run_dir)
    before = {n: sum(cpu_s(p) for p in pids) for n, pids in groups.items()}
    t0 = time.monotonic()
    time.sleep(window_s)
    took = time.monotonic() - t0
    out = {n: (sum(cpu_s(p) for p in pids) - before[n]) / took for n, pids in groups.items()}
    out["total"] = sum(out.values())
    return out


async def freshness(bootstrap: str, target: str, docs: int, gap_s: float, warm_up: int = 0,
                    ) -> tuple[list[float], dict[str, float]]:
    """Produce -> returned by Retrieve (ms) per document, and the send times by id.

    The first `warm_up` documents are sent the same way but not counted: the first
    document through a freshly started mesh pays its one-time costs (the audit chain's
    ends read back, the ledger's first anchor, first calls into spaCy and ONNX), and one
    after the idle window is the first after a quiet spell, which the quiet-spell run measures.
    """
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    out, sent = [], {}
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        for i in range(-warm_up, docs):
            source = f"bench-{uuid.uuid4().hex[:8]}"
            doc = {"id": source, "text": TEXT.format(t=time.time(), i=i), "source": source}
            await asyncio.sleep(gap_s)  # light load: the mesh is caught up between documents
            sent[source] = time.time() * 1000
            t0 = time.perf_counter()
            await producer.send_and_wait("docs.raw.v1", json.dumps(doc).encode(),
                                         key=source.encode())
            while not stub.Retrieve(inference_pb2.RetrieveRequest(
                    question="why did checkout fail", source=source, top_k=1),
                    timeout=10).chunks:
                await asyncio.sleep(0.005)
            took = (time.perf_counter() - t0) * 1000
            if i < 0:
                del sent[source]
                print(f"  freshness warm-up document: {took:.0f} ms (not counted)", flush=True)
                continue
            out.append(took)
            print(f"  freshness {i + 1}/{docs}: {out[-1]:.0f} ms", flush=True)
    await producer.stop()
    return out, sent


async def hop_times(bootstrap: str, sent: dict[str, float], fresh: list[float],
                    ) -> dict[str, dict[str, Any]]:
    """Per-hop delay (ms) from the Kafka timestamps of consecutive pipeline topics."""
    stamps = await first_stamps(bootstrap, sent)
    out = hop_delays(stamps, sent)
    done = {k: f for k, f in zip(sent, fresh, strict=True)}
    out["chunks.embedded.v1 -> queryable"] = [
        done[k] - (stamps["chunks.embedded.v1"][k] - sent[k]) for k in sent
        if k in stamps["chunks.embedded.v1"]]
    return {hop: {**summary(xs), "samples": xs} for hop, xs in out.items()}


async def burst(bootstrap: str, target: str, docs: int) -> float:
    """Documents per second, `docs` produced at once (each its own source) until Retrieve,
    filtered to each source, returns every one of them."""
    prefix = f"burst-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    t0 = time.perf_counter()
    try:
        sent = [await producer.send("docs.raw.v1", json.dumps(
            {"id": f"{prefix}-{i}", "source": f"{prefix}-{i}",
             "text": TEXT.format(t=time.time(), i=i)}).encode(), key=f"{i}".encode())
            for i in range(docs)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()
    pending = {f"{prefix}-{i}" for i in range(docs)}
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        while pending:
            if time.perf_counter() - t0 > 600:
                raise TimeoutError(f"burst: {len(pending)}/{docs} not searchable after 600 s")
            for source in sorted(pending):
                if stub.Retrieve(inference_pb2.RetrieveRequest(
                        question="why did checkout fail", source=source, top_k=1),
                        timeout=10).chunks:
                    pending.discard(source)
            await asyncio.sleep(0.05)
    took = time.perf_counter() - t0
    print(f"  burst: {docs} documents searchable in {took:.1f} s", flush=True)
    return docs / took


def query_latency(target: str, n: int) -> tuple[list[float], list[float]]:
    e2e, retrieval = [], []
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        for i in range(n):
            t0 = time.perf_counter()
            resp = stub.Query(inference_pb2.QueryRequest(question=f"why did checkout {i} fail",
                                                         top_k=5, answer_mode="extractive"),
                              timeout=10)
            e2e.append((time.perf_counter() - t0) * 1000)
            retrieval.append(resp.timings.retrieval_ms)
    return e2e, retrieval


def measure(mode: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    print(f"starting the mesh, {mode} {env or ''}...", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, \
            isolated(Path(tmp), ANVIL, env=env,
                     processes=MODES[mode]) as mesh:
        ready_s = time.monotonic() - started
        print(f"  ready after {ready_s:.1f} s; settling {args.settle_s:.0f} s, then idle CPU "
              f"over {args.idle_s:.0f} s", flush=True)
        time.sleep(args.settle_s)
        idle = idle_cpu(mesh.run_dir, args.idle_s)
        fresh, sent = asyncio.run(freshness(mesh.bootstrap, mesh.grpc_target, args.docs,
                                            args.gap_s, warm_up=1))
        hops = asyncio.run(hop_times(mesh.bootstrap, sent, fresh))
        print(f"  after a quiet spell: {args.idle_docs} documents, {args.idle_gap_s:.0f} s "
              "apart", flush=True)
        cold, _ = asyncio.run(freshness(mesh.bootstrap, mesh.grpc_target, args.idle_docs,
                                        args.idle_gap_s))
        e2e, retrieval = query_latency(mesh.grpc_target, args.queries)
        rate = asyncio.run(burst(mesh.bootstrap, mesh.grpc_target, args.burst)) \
            if args.burst else 0.0
        memory = memory_gib(mesh.run_dir)
        processes = sum(len(p) for p in group_pids(mesh.run_dir).values())
    return {"ready_s": ready_s, "idle_cores": idle, "memory_gib": memory,
            "processes": processes, "freshness": summary(fresh), "hops": hops,
            "freshness_after_idle": summary(cold),
            "query": summary(e2e), "retrieval": summary(retrieval), "burst_docs_s": rate,
            "samples": {"freshness": fresh, "after_idle": cold, "query": e2e,
                        "retrieval": retrieval}}


def combined(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration over its rounds: latency samples pooled, the rest the median."""
    def med(get: Any) -> float:
        return statistics.median(get(r) for r in rounds)

    names = {n for r in rounds for n in r["memory_gib"]["per_process"]}
    hops = {h: summary([x for r in rounds for x in r["hops"][h]["samples"]])
            for h in rounds[0]["hops"]}
    pooled = {k: summary([x for r in rounds for x in r["samples"][k]])
              for k in rounds[0]["samples"]}
    return {
        "rounds": len(rounds), "ready_s": med(lambda r: r["ready_s"]),
        "processes": med(lambda r: r["processes"]),
        "idle_cores": {k: med(lambda r, k=k: r["idle_cores"].get(k, 0.0))
                       for k in rounds[0]["idle_cores"]},
        "memory_gib": {"rss": med(lambda r: r["memory_gib"]["rss"]),
                       "peak": med(lambda r: r["memory_gib"]["peak"]),
                       "per_process": {n: med(lambda r, n=n: r["memory_gib"]["per_process"]
                                              .get(n, 0.0)) for n in sorted(names)}},
        "burst_docs_s": med(lambda r: r["burst_docs_s"]),
        "spans": med(lambda r: r.get("spans", 0)),
        "freshness": pooled["freshness"], "freshness_after_idle": pooled["after_idle"],
        "query": pooled["query"], "retrieval": pooled["retrieval"], "hops": hops,
        "freshness_p50_rounds": [r["freshness"]["p50"] for r in rounds],
        "freshness_p95_rounds": [r["freshness"]["p95"] for r in rounds],
    }


def print_table(res: dict[str, Any], modes: list[str]) -> None:
    rows: list[tuple[str, Any, str, str]] = [
        ("start to ready (s)", lambda m: (m["ready_s"],), "{:.1f}", ""),
        ("processes (all)", lambda m: (m["processes"],), "{}", ""),
        ("idle CPU, all (cores)", lambda m: (m["idle_cores"]["total"],), "{:.3f}", "<= 0.1"),
        ("  of which broker", lambda m: (m["idle_cores"].get("broker", 0.0),), "{:.3f}", ""),
        ("  of which anvil", lambda m: (m["idle_cores"].get("anvil", 0.0),), "{:.3f}", ""),
        ("RSS now / peak (GiB)", lambda m: (m["memory_gib"]["rss"], m["memory_gib"]["peak"]),
         "{:.2f} / {:.2f}", "1.5 / 2.5"),
        ("freshness p50 / p95 (ms)", lambda m: (m["freshness"]["p50"], m["freshness"]["p95"]),
         "{:.0f} / {:.0f}", "250 / 350"),
    ]
    rows.append(("  per round p50 (ms)", lambda m: (", ".join(
        f"{x:.0f}" for x in m["freshness_p50_rounds"]),), "{}", ""))
    rows.append(("  per round p95 (ms)", lambda m: (", ".join(
        f"{x:.0f}" for x in m["freshness_p95_rounds"]),), "{}", ""))
    rows.append(("freshness after a quiet spell p50 / max (ms)",
                 lambda m: (m["freshness_after_idle"]["p50"], m["freshness_after_idle"]["p99"]),
                 "{:.0f} / {:.0f}", ""))
    for hop in res["modes"][modes[0]]["hops"]:
        rows.append((f"  {hop.replace('.v1', '')}", lambda m, h=hop: (m["hops"][h]["p50"],),
                     "{:.0f}", "(p50)"))
    rows += [
        ("burst throughput (docs/s)", lambda m: (m["burst_docs_s"],), "{:.2f}", ""),
        ("  ratio to the first column", lambda m: (m["burst_docs_s"] / max(
            1e-9, res["modes"][modes[0]]["burst_docs_s"]),), "{:.2f}", ""),
        ("spans received (OTLP)", lambda m: (m["spans"],), "{:.0f}", ""),
        ("Query p50 / p99 (ms)", lambda m: (m["query"]["p50"], m["query"]["p99"]),
         "{:.0f} / {:.0f}", ""),
        ("  retrieval p50 (ms)", lambda m: (m["retrieval"]["p50"],), "{:.1f}", ""),
    ]
    names = sorted({n for m in modes for n in res["modes"][m]["memory_gib"]["per_process"]})
    rows += [(f"RSS {n} (GiB)", lambda m, n=n: (m["memory_gib"]["per_process"].get(n, 0.0),),
              "{:.2f}", "") for n in names]
    width = max(16, *(len(m) + 2 for m in modes))

    def cell(mode: str, get: Any, fmt: str) -> str:
        return f"{fmt.format(*get(res['modes'][mode])):>{width}}"

    print(f"\n{'measure':<48}" + "".join(f"{m:>{width}}" for m in modes) + f"{'target':>12}")
    for name, get, fmt, target in rows:
        print(f"{name:<48}" + "".join(cell(m, get, fmt) for m in modes) + f"{target:>12}")
    if res["before"]:
        print(f"'<mode> before': the same bring-up with {res['before']} (same run)")
    print(f"rounds per configuration: {res['args']['rounds']} (latency samples pooled, the "
          "rest the median of rounds)")
    floor = res["floor"]
    print(f"\nin-process floor: redact+chunk+embed+index p50 {floor['ingest']['p50']:.1f} ms "
          f"per document; encode+search p50 {floor['query']['p50']:.1f} ms per query")
    print("targets: RSS 1.5 GiB one-process, 2.5 GiB multi-process; freshness with "
          "redaction on, light load")


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_latency", description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--gap-s", type=float, default=0.5, help="pause before each document")
    ap.add_argument("--idle-docs", type=int, default=5,
                    help="documents produced after a quiet spell each (freshness when idle)")
    ap.add_argument("--idle-gap-s", type=float, default=7.0,
                    help="the quiet spell before each of them (s)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--settle-s", type=float, default=10.0)
    ap.add_argument("--idle-s", type=float, default=20.0)
    ap.add_argument("--before", nargs="*", default=[], metavar="KEY=VALUE",
                    help="settings of a baseline run beside each bring-up ('<mode> before')")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--burst", type=int, default=None,
                    help="documents for the throughput burst (default 0; 200 with --tracing)")
    ap.add_argument("--tracing", action="store_true",
                    help="each bring-up with tracing off, on at 1%% and on at 100%%")
    args = ap.parse_args()
    if args.burst is None:
        args.burst = 200 if args.tracing else 0
    before = dict(kv.split("=", 1) for kv in args.before)
    receiver = Receiver().__enter__() if args.tracing else None
    configs: list[tuple[str, dict[str, str]]] = []
    for m in args.modes:
        configs += [(m, {}), (f"{m} before", before)] if before else [(m, {})]
        if receiver is not None:
            on = {"STREAMRAG_TRACING_EXPORTER": "otlp",
                  "STREAMRAG_TRACING_OTLP_ENDPOINT": receiver.endpoint}
            configs += [(f"{m} trace1%", {**on, "STREAMRAG_TRACING_SAMPLE_RATIO": "0.01"}),
                        (f"{m} trace100%", {**on, "STREAMRAG_TRACING_SAMPLE_RATIO": "1.0"})]
    print("in-process baseline ...", flush=True)
    floor_ingest, floor_query = in_process_floor(args.docs)
    res: dict[str, Any] = {"args": vars(args), "before": before, "floor": {
        "ingest": summary(floor_ingest), "query": summary(floor_query)}, "modes": {}}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in configs}
    for r in range(args.rounds):
        k = r % len(configs)  # rotate the order every round
        for label, env in configs[k:] + configs[:k]:
            print(f"round {r + 1}/{args.rounds}: {label}", flush=True)
            received = len(receiver.spans()) if receiver is not None else 0
            runs[label].append(measure(label.split()[0], env, args))
            # Spans still queued in a stopped process are flushed at its exit.
            runs[label][-1]["spans"] = (len(receiver.spans()) - received) if receiver else 0
    res["modes"] = {label: combined(rounds) for label, rounds in runs.items()}
    res["runs"] = runs
    print_table(res, list(runs))
    out = RESULTS / "latency.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
