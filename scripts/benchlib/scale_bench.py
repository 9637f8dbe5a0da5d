"""Scale-out: throughput and CPU cost per document and per query at 1, 2, 4 workers.

    scripts/bench_scale                          # 1, 2 and 4 workers, 300 documents each
    scripts/bench_scale --workers 1,2 --docs 100 --queries 40 --qps 4

For each worker count N it starts a mesh of its own (scripts/benchlib/scale.py: embedded
broker, chunking and inference once, N processes of each heavy stage: redaction,
embedding, retrieval, in their stage's consumer group) and waits until every group holds
its N workers, each partition owned by one. Then:
  - idle: the cores each stage's workers use with nothing to do, over 10 s (what a worker
    costs before it does anything: polling, heartbeats, timers);
  - documents: --docs documents of about 1 KB (--sentences), each with PII, produced at
    once to docs.normalized.v1;
    end to end docs/s is documents / seconds until every one is on docs.redacted.v1,
    chunks.embedded.v1 and held by the shards (asked the way inference scatters); per
    stage, documents / seconds from the burst's start until the stage emitted the last one
    (the stages run as a pipeline, so a stage's figure is capped by the one before it);
  - CPU-seconds per document of each stage: utime + stime (/proc/<pid>/stat) of every
    worker of the stage, after minus before the burst, over the documents;
  - queries: --queries gRPC Query calls (extractive answer, top 10) at each rate of --qps,
    one at a time; CPU-seconds per query of inference (question encoding, scatter, gather,
    answer), of the retrieval workers (every shard searches every query) and of the
    broker: gross at the highest rate (all the processes used, over the queries) and
    marginal (extra cores from the lowest rate to the highest over the extra queries/s).
Prints a table with each figure's ratio to the 1-worker run, and progress lines while it
runs. Writes bench-results/scale.json. On a 2-core machine throughput flattens once two
CPU-bound workers share the cores; the CPU cost per document is what docs/capacity.md
builds on.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from scripts.benchlib.paths import RESULTS
from scripts.benchlib.procs import cpu_s
from scripts.benchlib.progress import Progress
from scripts.benchlib.scale import HEAVY, ScaleMesh, document, wait
from services.cli.mesh import free_port
from shared.contract.topics import CHUNKS_EMBEDDED, DOCS_REDACTED
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc

TIMEOUT_S = 600.0
QUERY_SIDE = ("inference", "retrieval", "broker")
ENV = {"STREAMRAG_KAFKA_SESSION_TIMEOUT_S": "6",
       "STREAMRAG_INFERENCE_GENERATOR_BUNDLED": "false"}
QUESTIONS = ("who do I call about invoice {n}", "why did the billing export stall on node {n}",
             "ticket {n} phone number", "which node stalled the export for invoice {n}")


def ids_on(mesh: ScaleMesh, topic: Any, want: set[str]) -> dict[str, float]:
    """Doc id -> the Kafka timestamp (s) of its first record on `topic`, for `want`."""
    out: dict[str, float] = {}
    for r in mesh.read(topic):
        doc = json.loads(r.value)["doc_id"]
        if doc in want:
            out[doc] = min(out.get(doc, r.timestamp / 1000), r.timestamp / 1000)
    return out


def held(mesh: ScaleMesh, want: set[str]) -> set[str]:
    replies = mesh.search_all()
    if len(replies) != CHUNKS_EMBEDDED.partitions or any(r.error for r in replies):
        return set()
    return {h.doc_id for r in replies for res in r.results for h in res.hits} & want


def stage_cpu(mesh: ScaleMesh, infra: dict[str, int]) -> dict[str, float]:
    out = {stage: sum(mesh.cpu(stage).values()) for stage in HEAVY}
    out.update({name: cpu_s(pid) for name, pid in infra.items()})
    return out


def idle(mesh: ScaleMesh, infra: dict[str, int], seconds: float) -> dict[str, float]:
    """Cores each stage uses with nothing to do (all its workers together), over `seconds`."""
    before = stage_cpu(mesh, infra)
    time.sleep(seconds)
    after = stage_cpu(mesh, infra)
    return {k: (after[k] - before[k]) / seconds for k in after}


def documents(mesh: ScaleMesh, n: int, sentences: int,
              infra: dict[str, int]) -> dict[str, Any]:
    """The burst: end-to-end and per-stage docs/s, and CPU-s per document per stage."""
    docs = [document(i, "bench", sentences) for i in range(n)]
    want = {d.doc_id for d in docs}
    before = stage_cpu(mesh, infra)
    started = time.time()
    mesh.produce(docs)
    progress = Progress("documents searchable", n, "docs", every_s=5)
    done: set[str] = set()
    deadline = time.monotonic() + TIMEOUT_S
    while len(done) < n and time.monotonic() < deadline:
        now = held(mesh, want)
        progress.add(len(now - done))
        done |= now
        time.sleep(0.3)
    finished = time.time()
    after = stage_cpu(mesh, infra)
    if len(done) < n:
        raise AssertionError(f"{n - len(done)} documents never became searchable")
    redacted = ids_on(mesh, DOCS_REDACTED, want)
    embedded = ids_on(mesh, CHUNKS_EMBEDDED, want)
    return {"docs": n, "seconds": finished - started,
            "docs_per_s": n / (finished - started),
            "stage_docs_per_s": {"redaction": n / (max(redacted.values()) - started),
                                 "embedding": n / (max(embedded.values()) - started),
                                 "retrieval": n / (finished - started)},
            "cpu_s_per_doc": {k: (after[k] - before[k]) / n for k in after}}


def queries(mesh: ScaleMesh, target: str, n: int, qps: float,
            infra: dict[str, int]) -> dict[str, Any]:
    """n queries at `qps`, one at a time: CPU-s per query of inference and retrieval.
    Every question is new (its rate and index in it), so neither the question encoder's
    cache nor the answer cache spares any of them their work."""
    tag = f"at {qps:g} q/s, question"
    progress = Progress("queries", n, "queries", every_s=5)
    latencies = []
    with grpc.insecure_channel(target) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        before = stage_cpu(mesh, infra)
        start = time.monotonic()
        for i in range(n):
            time.sleep(max(0.0, start + i / qps - time.monotonic()))
            asked = time.perf_counter()
            stub.Query(inference_pb2.QueryRequest(
                question=f"{QUESTIONS[i % len(QUESTIONS)].format(n=i % 50)} ({tag} {i})",
                top_k=10,
                answer_mode="extractive"), timeout=30)
            latencies.append((time.perf_counter() - asked) * 1000)
            progress.add()
        after = stage_cpu(mesh, infra)
        seconds = time.monotonic() - start
    return {"queries": n, "qps": n / seconds, "p50_ms": sorted(latencies)[len(latencies) // 2],
            "cores": {k: (after[k] - before[k]) / seconds for k in QUERY_SIDE},
            "cpu_s_per_query": {k: (after[k] - before[k]) / n for k in QUERY_SIDE}}


def query_costs(mesh: ScaleMesh, target: str, n: int, rates: list[float],
                infra: dict[str, int]) -> dict[str, Any]:
    """CPU-s per query at each rate (gross: what the processes used over the run, over the
    queries), and the marginal cost: the extra cores from the lowest to the highest rate
    over the extra queries/s, which leaves out what workers cost with no queries at all."""
    runs = [queries(mesh, target, n, qps, infra) for qps in rates]
    low, high = runs[0], runs[-1]
    span = high["qps"] - low["qps"]
    return {"query_runs": runs, "cpu_s_per_query": high["cpu_s_per_query"],
            "marginal_cpu_s_per_query": {
                k: (high["cores"][k] - low["cores"][k]) / span if span > 0 else math.nan
                for k in QUERY_SIDE}}


def run(workers: int, docs: int, sentences: int, n_queries: int, rates: list[float],
        ) -> dict[str, Any]:
    grpc_port = free_port()
    target = f"127.0.0.1:{grpc_port}"
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        mesh = ScaleMesh(Path(tmp), {**ENV, "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port)})
        try:
            print(f"  {workers} worker(s) per heavy stage: starting", flush=True)
            mesh.start(once=("chunking", "inference"))
            infra = {c.name: c.popen.pid for c in mesh.infra}
            for stage in HEAVY:
                mesh.add(stage, workers)
            for stage in HEAVY:
                wait(lambda s=stage: mesh.balanced(s), f"{stage} balanced", TIMEOUT_S, mesh)
            warm = [document(i, "warm", sentences) for i in range(8)]
            mesh.produce(warm)
            wait(lambda: held(mesh, {d.doc_id for d in warm}) == {d.doc_id for d in warm},
                 "the warm-up documents searchable", TIMEOUT_S, mesh)
            print(f"  {workers} worker(s): groups balanced, warm; idle CPU for 10 s",
                  flush=True)
            out: dict[str, Any] = {"workers": workers, "idle_cores": idle(mesh, infra, 10)}
            print(f"  {workers} worker(s): {docs} documents", flush=True)
            out.update(documents(mesh, docs, sentences, infra))
            print(f"  {workers} worker(s): {out['docs_per_s']:.1f} docs/s; {n_queries} "
                  f"queries at each of {rates} q/s", flush=True)
            out.update(query_costs(mesh, target, n_queries, rates, infra))
            return out
        finally:
            mesh.stop()


def table(rows: list[dict[str, Any]]) -> str:
    base, nan = rows[0], math.nan
    head = ("workers/stage | docs/s end to end | redaction | embedding | retrieval | "
            "CPU-s/doc redaction | embedding | retrieval | chunking | broker | "
            "CPU-s/query inference | retrieval | broker | "
            "marginal CPU-s/query inference | retrieval | broker")
    lines = [head, "-" * len(head)]
    for r in rows:
        def fig(value: float, base_value: float, fmt: str) -> str:
            ratio = value / base_value if base_value else float("nan")
            return f"{value:{fmt}} ({ratio:.2f}x)"
        stage = r["stage_docs_per_s"]
        cpu, qcpu = r["cpu_s_per_doc"], r["cpu_s_per_query"]
        bcpu, bq = base["cpu_s_per_doc"], base["cpu_s_per_query"]
        mq, bmq = (r.get("marginal_cpu_s_per_query", {}),
                   base.get("marginal_cpu_s_per_query", {}))
        lines.append(" | ".join([
            f"{r['workers']:>13}", fig(r["docs_per_s"], base["docs_per_s"], ".1f"),
            *(fig(stage[s], base["stage_docs_per_s"][s], ".1f") for s in HEAVY),
            *(fig(cpu[s], bcpu[s], ".4f") for s in (*HEAVY, "chunking", "broker")),
            *(fig(qcpu.get(s, nan), bq.get(s, nan), ".4f") for s in QUERY_SIDE),
            *(fig(mq.get(s, nan), bmq.get(s, nan), ".4f") for s in QUERY_SIDE)]))
    lines += ["", "idle cores (nothing to do) | " + " | ".join(
        f"{s}" for s in (*HEAVY, "chunking", "inference", "broker"))]
    lines += [f"{r['workers']:>13} worker(s) | " + " | ".join(
        f"{r['idle_cores'][s]:.3f}" for s in (*HEAVY, "chunking", "inference", "broker"))
        for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4",
                        help="worker counts per heavy stage, comma-separated (first: baseline)")
    parser.add_argument("--docs", type=int, default=300, help="documents per burst")
    parser.add_argument("--sentences", type=int, default=6,
                        help="ordinary sentences after each document's PII line (6: ~1 KB)")
    parser.add_argument("--queries", type=int, default=60, help="queries per rate")
    parser.add_argument("--qps", default="2,6",
                        help="query rates, comma-separated, lowest first (one query at a "
                             "time; the marginal cost is taken between the first and last)")
    args = parser.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    rows = []
    for i, n in enumerate(counts, 1):
        print(f"[{i}/{len(counts)}] {n} worker(s) per heavy stage", flush=True)
        rows.append(run(n, args.docs, args.sentences, args.queries,
                        [float(x) for x in args.qps.split(",")]))
    print()
    print(table(rows))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(rows, indent=2))
    print(f"\nwritten {RESULTS / 'scale.json'}")


if __name__ == "__main__":
    main()
