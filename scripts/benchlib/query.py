"""Query throughput through the real mesh: wait-free batching vs the adaptive wait it replaced.

One mesh (embedded broker, anvil, seven services) on free ports serves every configuration
at once: its own inference worker runs the current batching ("wait-free", shared/batching),
and the bench starts one more inference worker per other configuration on the same broker
and shards: "adaptive wait" (the batching before the unification, rebuilt in
scripts/benchlib/adaptive_wait.py; the baseline) and "batch size 1" (every batching of the
query path off: encoder batches and shared search requests). The sentence cache stays on
in all. A small corpus is produced with a plain aiokafka producer; once it is searchable,
closed-loop gRPC clients ask distinct questions (no batch gets a free ride from repeated
text), one configuration at a time, for `--seconds` per concurrency, in `--rounds` rounds
whose configuration order rotates, so machine noise falls on all of them alike. Query
gives QPS and p50/p99 (latencies pooled over the rounds); with --stream-seconds,
StreamQuery gives the time to the citations (first message), to the first answer delta
and to the end. Prints a table with the ratios to the adaptive wait at the same
concurrency, the spread of the per-round QPS ratio, the mean batch sizes each server ran
(from its Prometheus endpoint), and writes bench-results/query.json.

--encoder compares the encoder runtime and the answer's sentence shortlist instead of the
batching: today's defaults (ONNX Runtime, the 8 best sentences by BM25 encoded), ONNX with
every candidate sentence encoded, and the baseline, torch (default threads) with every
sentence encoded (the defaults before). --cold turns the sentence cache off in every
configuration, so each Query encodes its answer's sentences as on a corpus it has not seen
(bench-results/query-encoder-cold.json).

--retrieve measures the Retrieve RPC instead (ranked chunks, no answer): the mesh's worker
(today's defaults) and a baseline worker on torch with its default threads (as before),
and with --onnx-threads N... one more ONNX worker per thread count, interleaved by round:
QPS and p50/p99 at each concurrency (default 1 and 8 clients), written to
bench-results/retrieve.json. --retrieve --search-path compares the search path instead:
two one-process meshes, one searching its own shards in-process (the default) and one
forced through the broker (STREAMRAG_INFERENCE_LOCAL_SEARCH=false), written to
bench-results/retrieve-search-path.json.

--retrieve --tuning measures the query path's tuning on three one-process meshes
side by side: the baseline "fp32" (the query encoder's fp32 graph), "int8" (its int8
graph), and "int8 dense" (int8 with hybrid search off, for the p99 of hybrid against
dense-only search); everything else at today's defaults. Every mesh runs with the
question and sentence caches off (STREAMRAG_INFERENCE_QUESTION_CACHE_SIZE=0,
..._SENTENCE_CACHE_SIZE=0) and every question is distinct, so each Retrieve encodes its
question and each Query is a cold extractive answer. Per round: Retrieve at each
concurrency, then Query at one client (cold p50), meshes rotated. Besides QPS and latency
it reports the worker's CPU milliseconds per call (its user + system time over the level,
from /proc: what a call costs whatever else the shared machine runs) and writes
bench-results/retrieve-tuning.json.

--cache measures the answer cache on and off under repeated, Zipf-distributed questions
(scripts/benchlib/query_cache.py; bench-results/query-cache.json).

--int8-quality BEIR_DIR checks what the int8 query graph keeps of retrieval quality, in
process and without a mesh: the collection's documents ("title text", whole, 256 tokens)
encoded once by the fp32 graph (the chunk vectors stay fp32 in the mesh too; cached under
bench-results/quality-cache/), the judged queries encoded by the fp32 and by the int8
graph, exact inner-product search, BEIR's nDCG@10 / Recall@10 / Recall@100
(services/inference/search/relevance.py) for all queries and each half; writes
bench-results/int8-quality.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from scripts.benchlib.paths import ANVIL, RESULTS, ROOT
from scripts.benchlib.procs import cpu_s
from scripts.benchlib.query_cache import main_cache
from scripts.benchlib.stats import pct
from scripts.benchlib.tinylm import SHAPES, build_tiny_lm
from scripts.benchlib.workload import TOPICS, produce_corpus, wait_searchable
from services.cli.mesh import Endpoints, free_port, isolated
from services.cli.procs import Child, spawn, stop
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

BASELINE = "adaptive wait"
BATCHED = {"STREAMRAG_INFERENCE_EMBED_MAX_BATCH": "16",
           "STREAMRAG_INFERENCE_SEARCH_MAX_BATCH": "16"}
# name -> (the worker's `python -m` arguments, env); the first is the mesh's own worker.
CONFIGS: dict[str, tuple[list[str], dict[str, str]]] = {
    "wait-free": (["services.inference"], BATCHED),
    BASELINE: (["scripts.benchlib.adaptive_wait", "inference"], BATCHED),
    "batch size 1": (["services.inference"], {"STREAMRAG_INFERENCE_EMBED_MAX_BATCH": "1",
                                              "STREAMRAG_INFERENCE_SEARCH_MAX_BATCH": "1"}),
}
RUNTIME, SHORTLIST = "STREAMRAG_INFERENCE_ENCODER_RUNTIME", "STREAMRAG_INFERENCE_ANSWER_SHORTLIST"
# The query encoder before ONNX: torch with its default threads (one per core).
BEFORE = {RUNTIME: "torch", "STREAMRAG_INFERENCE_ENCODER_THREADS": "0"}
ENCODER_BASELINE = "torch, all"
ENCODER_CONFIGS: dict[str, tuple[list[str], dict[str, str]]] = {
    "onnx, short 8": (["services.inference"], {**BATCHED, RUNTIME: "onnx", SHORTLIST: "8"}),
    ENCODER_BASELINE: (["services.inference"], {**BATCHED, **BEFORE, SHORTLIST: "0"}),
    "onnx, all": (["services.inference"], {**BATCHED, RUNTIME: "onnx", SHORTLIST: "0"}),
}
RETRIEVE_BASELINE = "torch"
TUNING_BASELINE = "fp32"
NO_CACHES = {"STREAMRAG_INFERENCE_QUESTION_CACHE_SIZE": "0",
             "STREAMRAG_INFERENCE_SENTENCE_CACHE_SIZE": "0"}
INT8 = "STREAMRAG_INFERENCE_ENCODER_INT8"
TUNING_CONFIGS: dict[str, dict[str, str]] = {  # name -> env over BATCHED and NO_CACHES
    TUNING_BASELINE: {INT8: "false"},
    "int8": {INT8: "true"},
    "int8 dense": {INT8: "true", "STREAMRAG_INFERENCE_HYBRID": "false"},
}
PATH_BASELINE, LOCAL_SEARCH = "broker", "STREAMRAG_INFERENCE_LOCAL_SEARCH"
GEN_CONFIGS = {  # with --generator: the generation batcher, set like the encoder's
    "wait-free": {"STREAMRAG_INFERENCE_GEN_MAX_BATCH": "8"},
    BASELINE: {"STREAMRAG_INFERENCE_GEN_MAX_BATCH": "8"},
    "batch size 1": {"STREAMRAG_INFERENCE_GEN_MAX_BATCH": "1"},
}


async def closed_loop(stub: pb_grpc.InferenceStub, clients: int, seconds: float,
                      stream: bool, max_new_tokens: int = 0) -> dict[str, Any]:
    latencies: list[float] = []
    cites: list[float] = []
    firsts: list[float] = []
    gaps: list[float] = []
    errors = 0
    end = time.monotonic() + seconds
    tag = uuid.uuid4().hex[:6]  # distinct in every loop: no question is in a cache already

    async def client(n: int) -> None:
        nonlocal errors
        i = 0
        while time.monotonic() < end:
            topic = TOPICS[(n + i) % len(TOPICS)]
            question = f"why did {topic} return 502 errors (client {n}, {tag} question {i})?"
            request = pb.QueryRequest(question=question, top_k=5,
                                      max_new_tokens=max_new_tokens)
            i += 1
            t0 = time.perf_counter()
            try:
                if stream:
                    cited = first = last = None
                    async for message in stub.StreamQuery(request, timeout=60):
                        now = time.perf_counter() - t0
                        cited = now if cited is None else cited
                        if message.WhichOneof("event") == "delta":
                            first = now if first is None else first
                            if last is not None:
                                gaps.append((now - last) * 1000)
                            last = now
                    cites.append((cited or 0.0) * 1000)
                    firsts.append((first or 0.0) * 1000)
                else:
                    await stub.Query(request, timeout=60)
            except grpc.aio.AioRpcError:
                errors += 1
                continue
            latencies.append((time.perf_counter() - t0) * 1000)

    started = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(clients)))
    elapsed = time.monotonic() - started
    nan = float("nan")
    return {"clients": clients, "n": len(latencies), "errors": errors, "seconds": elapsed,
            "latencies": latencies,
            "qps": len(latencies) / elapsed, "p50": pct(latencies, 50),
            "p99": pct(latencies, 99), "cite_p50": pct(cites, 50) if stream else nan,
            "ttft_p50": pct(firsts, 50) if stream else nan,
            "gap_p50": pct(gaps, 50) if stream else nan}


async def retrieve_loop(stub: pb_grpc.InferenceStub, clients: int,
                        seconds: float) -> dict[str, Any]:
    """Closed-loop Retrieve calls, every question distinct: QPS, p50, p99 (ms), errors, and
    the server's own p50 split (encoding the question; scatter/gather)."""
    latencies: list[float] = []
    embeds: list[float] = []
    gathers: list[float] = []
    errors = 0
    end = time.monotonic() + seconds
    tag = uuid.uuid4().hex[:6]  # distinct in every loop: no question is in a cache already

    async def client(n: int) -> None:
        nonlocal errors
        i = 0
        while time.monotonic() < end:
            topic = TOPICS[(n + i) % len(TOPICS)]
            request = pb.RetrieveRequest(
                question=f"why did {topic} return 502 errors (client {n}, {tag} question {i})?",
                top_k=5)
            i += 1
            t0 = time.perf_counter()
            try:
                response = await stub.Retrieve(request, timeout=60)
            except grpc.aio.AioRpcError:
                errors += 1
                continue
            latencies.append((time.perf_counter() - t0) * 1000)
            embeds.append(response.timings.embed_ms)
            gathers.append(response.timings.retrieval_ms)

    started = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(clients)))
    elapsed = time.monotonic() - started
    return {"clients": clients, "n": len(latencies), "errors": errors, "seconds": elapsed,
            "latencies": latencies, "qps": len(latencies) / elapsed, "p50": pct(latencies, 50),
            "p99": pct(latencies, 99), "embed_p50": pct(embeds, 50),
            "gather_p50": pct(gathers, 50)}


async def measure_retrieve(servers: list[Server], bootstraps: list[str],
                           args: argparse.Namespace) -> None:
    source = f"bench-{uuid.uuid4().hex[:6]}"
    for bootstrap in bootstraps:  # each mesh under test gets the same corpus
        await produce_corpus(bootstrap, args.docs, source)
    channels = {s.name: grpc.aio.insecure_channel(s.target) for s in servers}
    stubs = {name: pb_grpc.InferenceStub(ch) for name, ch in channels.items()}
    try:
        for s in servers:
            await wait_searchable(stubs[s.name], source, args.docs)
            await retrieve_loop(stubs[s.name], 2, 2)  # warm-up
        for r in range(args.rounds):
            for clients in args.clients:
                k = r % len(servers)
                for s in servers[k:] + servers[:k]:
                    row = await retrieve_loop(stubs[s.name], clients, args.seconds)
                    s.rows.setdefault(clients, []).append(row)
                    print(f"  round {r + 1} [Retrieve, {s.name}] {clients:>3} clients: "
                          f"{row['qps']:6.1f} QPS, p50 {row['p50']:.1f} ms, p99 "
                          f"{row['p99']:.1f} ms (server p50: encode {row['embed_p50']:.1f}, "
                          f"gather {row['gather_p50']:.1f} ms), errors {row['errors']}",
                          flush=True)
    finally:
        for ch in channels.values():
            await ch.close()


def pooled_retrieve(rows: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [x for r in rows for x in r["latencies"]]
    return {"clients": rows[0]["clients"], "n": len(latencies),
            "errors": sum(r["errors"] for r in rows),
            "qps": len(latencies) / sum(r["seconds"] for r in rows),
            "p50": pct(latencies, 50), "p99": pct(latencies, 99),
            "embed_p50": statistics.median(r["embed_p50"] for r in rows),
            "gather_p50": statistics.median(r["gather_p50"] for r in rows)}


def main_retrieve(args: argparse.Namespace) -> int:
    env = dict(CONFIGS["wait-free"][1])
    print(f"starting a mesh with today's defaults ({env}) ...", flush=True)
    base_env = {**env, **BEFORE}
    with tempfile.TemporaryDirectory() as tmp, \
            isolated(Path(tmp), ANVIL, env=env) as mesh:
        child, baseline = spawn_inference(mesh, RETRIEVE_BASELINE, ["services.inference"],
                                          base_env)
        children, servers = [child], [Server("defaults", mesh.grpc_target, ""), baseline]
        for threads in args.onnx_threads:
            name = f"onnx {threads} thr"
            child, server = spawn_inference(mesh, name, ["services.inference"], {
                **env, "STREAMRAG_INFERENCE_ENCODER_THREADS": str(threads)})
            children.append(child)
            servers.append(server)
        try:
            asyncio.run(measure_retrieve(servers, [mesh.bootstrap], args))
        finally:
            stop(children, 15)
    table = print_retrieve(servers, args.clients, RETRIEVE_BASELINE)
    print(f"baseline: {RETRIEVE_BASELINE!r} (the query encoder on torch, as before ONNX) on the "
          "same mesh, rounds interleaved. QPS, p50, p99 pooled over the rounds; encode, "
          "gather: the server's own p50 (ms) of encoding the question and of the shards' "
          "scatter/gather (median over the rounds).")
    out = RESULTS / "retrieve.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"configs": {"defaults": env, RETRIEVE_BASELINE: base_env},
                               "results": table}, indent=2))
    print(f"wrote {out}")
    return 0


def main_search_path(args: argparse.Namespace) -> int:
    """Retrieve on two one-process meshes side by side: one searching its own shards
    in-process (the default), one forced through the broker (the path before)."""
    env = dict(CONFIGS["wait-free"][1])
    print("starting two one-process meshes (local search; broker only) ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp, \
            isolated(Path(tmp) / "local", ANVIL, env=env) as local, \
            isolated(Path(tmp) / "broker", ANVIL, env={**env, LOCAL_SEARCH: "false"}) as broker:
        servers = [Server(PATH_BASELINE, broker.grpc_target, ""),
                   Server("local", local.grpc_target, "")]
        asyncio.run(measure_retrieve(servers, [broker.bootstrap, local.bootstrap], args))
    table = print_retrieve(servers, args.clients, PATH_BASELINE)
    print(f"baseline: {PATH_BASELINE!r} (a one-process mesh whose search goes through the "
          "broker, STREAMRAG_INFERENCE_LOCAL_SEARCH=false) beside 'local' (the default: its "
          "own shards in-process), both running through the whole bench, rounds interleaved. "
          "gather: the server's own p50 (ms) of the search (local or scatter/gather).")
    out = RESULTS / "retrieve-search-path.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"configs": {"local": env, PATH_BASELINE: {
        **env, LOCAL_SEARCH: "false"}}, "args": vars(args), "results": table}, indent=2))
    print(f"wrote {out}")
    return 0


def onebox_pid(run_dir: Path) -> int | None:
    from services.cli.mesh import ONEBOX

    try:
        return int((run_dir / "pids" / f"{ONEBOX}.pid").read_text())
    except (OSError, ValueError):
        return None


async def measure_tuning(servers: list[Server], meshes: list[Endpoints],
                         args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Retrieve at each concurrency and cold Query at one client, every mesh in turn and the
    order rotated each round; each row with the worker's CPU ms per call. Returns the cold
    Query rows per mesh."""
    source = f"bench-{uuid.uuid4().hex[:6]}"
    for mesh in meshes:
        await produce_corpus(mesh.bootstrap, args.docs, source)
    pids = {s.name: onebox_pid(m.run_dir) for s, m in zip(servers, meshes, strict=True)}
    channels = {s.name: grpc.aio.insecure_channel(s.target) for s in servers}
    stubs = {name: pb_grpc.InferenceStub(ch) for name, ch in channels.items()}
    cold: dict[str, list[dict[str, Any]]] = {s.name: [] for s in servers}

    async def level(s: Server, clients: int | None) -> dict[str, Any]:
        before = cpu_s(pids[s.name], missing=float("nan"))
        row: dict[str, Any] = (
            await retrieve_loop(stubs[s.name], clients, args.seconds) if clients is not None
            else await closed_loop(stubs[s.name], 1, args.seconds, False, 0))
        used = cpu_s(pids[s.name], missing=float("nan")) - before
        row["cpu_ms"] = used * 1000 / max(1, row["n"])
        return row
    try:
        for s in servers:
            await wait_searchable(stubs[s.name], source, args.docs)
            await retrieve_loop(stubs[s.name], 2, 2)  # warm-up
        for r in range(args.rounds):
            k = r % len(servers)
            for clients in [*args.clients, None]:
                for s in servers[k:] + servers[:k]:
                    row = await level(s, clients)
                    what = f"Retrieve {clients:>2} clients" if clients else "Query cold  1 client"
                    (s.rows.setdefault(clients, []) if clients else cold[s.name]).append(row)
                    print(f"  round {r + 1} [{s.name}] {what}: {row['qps']:6.1f} QPS, p50 "
                          f"{row['p50']:.1f} ms, p99 {row['p99']:.1f} ms, worker CPU "
                          f"{row['cpu_ms']:.1f} ms/call, errors {row['errors']}", flush=True)
    finally:
        for ch in channels.values():
            await ch.close()
    return cold


def pooled_latency(rows: list[dict[str, Any]]) -> dict[str, float]:
    """QPS, p50, p99 over every round's calls; CPU ms per call: the rounds' median."""
    latencies = [x for r in rows for x in r["latencies"]]
    return {"n": len(latencies), "errors": sum(r["errors"] for r in rows),
            "qps": len(latencies) / sum(r["seconds"] for r in rows),
            "p50": pct(latencies, 50), "p99": pct(latencies, 99),
            "cpu_ms": statistics.median(r["cpu_ms"] for r in rows)}


def main_tuning(args: argparse.Namespace) -> int:
    """Retrieve and cold Query on one one-process mesh per TUNING_CONFIGS entry."""
    envs = {name: {**BATCHED, **NO_CACHES, **env} for name, env in TUNING_CONFIGS.items()}
    print(f"starting {len(envs)} one-process meshes ({', '.join(envs)}) ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        meshes = [stack.enter_context(isolated(Path(tmp) / name.replace(" ", "-"), ANVIL,
                                               env=env)) for name, env in envs.items()]
        servers = [Server(name, m.grpc_target, "") for name, m in zip(envs, meshes,
                                                                       strict=True)]
        cold = asyncio.run(measure_tuning(servers, meshes, args))
    table = print_retrieve(servers, args.clients, TUNING_BASELINE, cpu=True)
    cold_rows = {name: pooled_latency(rows) for name, rows in cold.items()}
    base = cold_rows[TUNING_BASELINE]
    print(f"\n{'Query cold':<10} {'clients':>7} {'QPS':>7} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'QPS ratio':>10} {'p50 ratio':>10} {'CPU ms':>7} {'calls':>6} {'errors':>6}")
    for name, r in cold_rows.items():
        print(f"{name:<10} {1:>7} {r['qps']:7.1f} {r['p50']:8.1f} {r['p99']:8.1f} "
              f"{r['qps'] / base['qps']:9.2f}x {r['p50'] / base['p50']:9.2f}x "
              f"{r['cpu_ms']:7.1f} {r['n']:>6} {r['errors']:>6}")
    hybrid = {r["clients"]: r for r in table["int8"]}
    dense = {r["clients"]: r for r in table["int8 dense"]}
    for c in args.clients:
        print(f"hybrid vs dense only at {c} clients: p99 {hybrid[c]['p99']:.1f} vs "
              f"{dense[c]['p99']:.1f} ms ({hybrid[c]['p99'] / dense[c]['p99']:.2f}x), QPS "
              f"{hybrid[c]['qps']:.1f} vs {dense[c]['qps']:.1f}")
    print(f"baseline: {TUNING_BASELINE!r} (the query encoder's fp32 graph) on its own "
          "one-process mesh beside 'int8' (its int8 graph) and 'int8 dense' (int8, hybrid "
          "search off), all running through the whole bench, rounds "
          "interleaved; question and sentence caches off, every question distinct. QPS, "
          "p50, p99 pooled over the rounds; encode, gather: the server's p50 (ms); CPU ms: "
          "the worker's CPU time per call (median over the rounds).")
    out = RESULTS / "retrieve-tuning.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"configs": envs, "args": vars(args), "results": table,
                               "query_cold": cold_rows}, indent=2))
    print(f"wrote {out}")
    return 0


def print_retrieve(servers: list[Server], clients: list[int], baseline: str,
                   cpu: bool = False) -> dict[str, list[dict[str, Any]]]:
    table = {s.name: [pooled_retrieve(s.rows[c]) for c in clients] for s in servers}
    if cpu:
        for s in servers:
            for row, c in zip(table[s.name], clients, strict=True):
                row["cpu_ms"] = statistics.median(r["cpu_ms"] for r in s.rows[c])
    base = {r["clients"]: r for r in table[baseline]}
    base_rows = {s.name: s.rows for s in servers}[baseline]
    print(f"\n{'Retrieve':<10} {'clients':>7} {'QPS':>7} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'QPS ratio':>10} {'(rounds)':>11} {'p50 ratio':>10} {'p99 ratio':>10} "
          f"{'encode':>7} {'gather':>7}" + (f" {'CPU ms':>7}" if cpu else "")
          + f" {'calls':>6} {'errors':>6}")
    for s in servers:
        for r in table[s.name]:
            c, b = r["clients"], base[r["clients"]]
            per_round = [x["qps"] / y["qps"] for x, y in zip(s.rows[c], base_rows[c],
                                                             strict=True)]
            spread = f"{min(per_round):.2f}-{max(per_round):.2f}"
            print(f"{s.name:<10} {c:>7} {r['qps']:7.1f} {r['p50']:8.1f} {r['p99']:8.1f} "
                  f"{r['qps'] / b['qps']:9.2f}x {spread:>11} {r['p50'] / b['p50']:9.2f}x "
                  f"{r['p99'] / b['p99']:9.2f}x {r['embed_p50']:7.1f} {r['gather_p50']:7.1f}"
                  + (f" {r['cpu_ms']:7.1f}" if cpu else "") + f" {r['n']:>6} {r['errors']:>6}")
    return table


def scrape(metrics_url: str) -> dict[str, float]:
    """Mean batch sizes and the sentence-cache hit rate from the server's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}

    def get(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)
    size = "streamrag_inference_batch_size"
    hits = get("streamrag_inference_sentence_cache_total", result="hit")
    misses = get("streamrag_inference_sentence_cache_total", result="miss")
    return {"embed_batches": get(f"{size}_count", batcher="embed"),
            "embed_items": get(f"{size}_sum", batcher="embed"),
            "gen_batches": get("streamrag_inference_decode_rows_count"),
            "gen_items": get("streamrag_inference_decode_rows_sum"),
            "cache_hit_rate": hits / max(1.0, hits + misses)}


@dataclass
class Server:
    """One inference worker under test: its gRPC target and metrics endpoint."""

    name: str
    target: str
    metrics_url: str
    rows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # clients -> rounds


def spawn_inference(mesh: Endpoints, name: str, module: list[str], env: dict[str, str]) -> tuple[
        Child, Server]:
    """One more inference worker on the mesh's broker, with its own ports and data dir."""
    grpc_port, metrics_port = free_port(), free_port()
    slug = name.replace(" ", "-")
    child_env = {"STREAMRAG_KAFKA_BOOTSTRAP": mesh.bootstrap,
                 "STREAMRAG_LEDGER_RPC_URL": mesh.rpc_url,
                 "STREAMRAG_DATA_DIR": str(mesh.run_dir / f"data-{slug}"),
                 "STREAMRAG_INFERENCE_GRPC_PORT": str(grpc_port),
                 "STREAMRAG_INFERENCE_METRICS_PORT": str(metrics_port), **env}
    child = spawn(f"inference-{slug}", [sys.executable, "-m", *module], mesh.run_dir, child_env)
    return child, Server(name, f"127.0.0.1:{grpc_port}",
                         f"http://127.0.0.1:{metrics_port}/metrics")


async def measure(servers: list[Server], bootstrap: str, args: argparse.Namespace) -> None:
    source = f"bench-{uuid.uuid4().hex[:6]}"
    await produce_corpus(bootstrap, args.docs, source)
    channels = {s.name: grpc.aio.insecure_channel(s.target) for s in servers}
    stubs = {name: pb_grpc.InferenceStub(ch) for name, ch in channels.items()}
    try:
        for s in servers:
            print(f"  [{s.name}] waiting until the corpus is searchable", flush=True)
            await wait_searchable(stubs[s.name], source, args.docs)
            await closed_loop(stubs[s.name], 2, 2, False, args.max_new_tokens)  # warm-up
        for r in range(args.rounds):
            for clients in args.clients:
                # Rotate the order every round: drift on a shared machine hits all alike.
                k = r % len(servers)
                for s in servers[k:] + servers[:k]:
                    row = await one_level(s, stubs[s.name], clients, args)
                    s.rows.setdefault(clients, []).append(row)
                    print(f"  round {r + 1} [{s.name}] {clients:>3} clients: "
                          f"{row['qps']:6.1f} QPS, p50 {row['p50']:.0f} ms, "
                          f"p99 {row['p99']:.0f} ms, batch {row['embed_batch']:.1f}, "
                          f"errors {row['errors']}", flush=True)
    finally:
        for ch in channels.values():
            await ch.close()


async def one_level(server: Server, stub: pb_grpc.InferenceStub, clients: int,
                    args: argparse.Namespace) -> dict[str, Any]:
    before = scrape(server.metrics_url)
    row: dict[str, Any] = await closed_loop(stub, clients, args.seconds, False,
                                            args.max_new_tokens)
    after = scrape(server.metrics_url)
    row.update(cache_hit_rate=after["cache_hit_rate"],
               embed_batches=after["embed_batches"] - before["embed_batches"],
               embed_items=after["embed_items"] - before["embed_items"],
               gen_batches=after["gen_batches"] - before["gen_batches"],
               gen_items=after["gen_items"] - before["gen_items"])
    row["embed_batch"] = row["embed_items"] / max(1.0, row["embed_batches"])
    if args.stream_seconds > 0:
        s = await closed_loop(stub, clients, args.stream_seconds, True, args.max_new_tokens)
        row.update(cite_p50=s["cite_p50"], ttft_p50=s["ttft_p50"], stream_p50=s["p50"],
                   gap_p50=s["gap_p50"], stream_p99=s["p99"])
    return row


def pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row over every round: latencies pooled, QPS over the summed time."""
    latencies = [x for r in rows for x in r["latencies"]]
    nan = float("nan")

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rows) if key in rows[0] else nan
    return {"clients": rows[0]["clients"], "n": len(latencies),
            "errors": sum(r["errors"] for r in rows),
            "qps": len(latencies) / sum(r["seconds"] for r in rows),
            "p50": pct(latencies, 50), "p99": pct(latencies, 99),
            "embed_batch": sum(r["embed_items"] for r in rows)
            / max(1.0, sum(r["embed_batches"] for r in rows)),
            "gen_batch": sum(r["gen_items"] for r in rows)
            / max(1.0, sum(r["gen_batches"] for r in rows)),
            "cite_p50": median("cite_p50"), "ttft_p50": median("ttft_p50"),
            "stream_p50": median("stream_p50"), "gap_p50": median("gap_p50"),
            "cache_hit_rate": rows[-1]["cache_hit_rate"]}


def print_table(servers: list[Server], clients: list[int], baseline: str,
                ) -> dict[str, list[dict[str, Any]]]:
    table = {s.name: [pooled(s.rows[c]) for c in clients] for s in servers}
    base = {r["clients"]: r for r in table[baseline]}
    base_rows = {s.name: s.rows for s in servers}[baseline]
    print(f"\n{'config':<14} {'clients':>7} {'QPS':>7} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'QPS ratio':>10} {'(rounds)':>11} {'p50 ratio':>10} {'p99 ratio':>10} "
          f"{'batch':>6} {'cites p50':>10} {'1st delta':>10} {'end p50':>8} {'gen b.':>6} "
          f"{'errors':>6}")
    for s in servers:
        for r in table[s.name]:
            b, c = base[r["clients"]], r["clients"]
            per_round = [x["qps"] / y["qps"] for x, y in zip(s.rows[c], base_rows[c],
                                                             strict=True)]
            spread = f"{min(per_round):.2f}-{max(per_round):.2f}"
            print(f"{s.name:<14} {c:>7} {r['qps']:7.1f} {r['p50']:8.1f} {r['p99']:8.1f} "
                  f"{r['qps'] / b['qps']:9.2f}x {spread:>11} {r['p50'] / b['p50']:9.2f}x "
                  f"{r['p99'] / b['p99']:9.2f}x {r['embed_batch']:6.1f} {r['cite_p50']:10.1f} "
                  f"{r['ttft_p50']:10.1f} {r['stream_p50']:8.1f} {r['gen_batch']:6.1f} "
                  f"{r['errors']:6.0f}")
    what = ("the batching before the unification" if baseline == BASELINE
            else "the query encoder on torch, every candidate sentence encoded")
    print(f"baseline: {baseline!r} ({what}) at the same "
          "concurrency, measured in this run on the same mesh, configurations interleaved. "
          "Query: QPS, p50, p99 over all rounds; (rounds): the lowest and highest QPS ratio of "
          "a single round. batch: mean encoder batch (requests). With --stream-seconds, "
          "StreamQuery medians over the rounds: first message (citations), first answer "
          "delta, end; gen b.: mean rows per decode step.")
    return table


def main_int8_quality(beir: Path) -> int:
    """nDCG@10 of the same fp32 document vectors searched with fp32 and int8 question vectors."""
    import hashlib

    import faiss
    import numpy as np

    from scripts.benchlib.relevance import evaluate
    from shared.encoder.onnx import OnnxEncoder

    split = "test" if (beir / "qrels/test.tsv").exists() else "train"
    qrels: dict[str, dict[str, int]] = {}
    for line in (beir / f"qrels/{split}.tsv").read_text().splitlines()[1:]:
        q, d, grade = line.split("\t")
        qrels.setdefault(q, {})[d] = int(grade)
    queries = {o["_id"]: o["text"] for o in map(json.loads, (
        beir / "queries.jsonl").read_text().splitlines()) if o["_id"] in qrels}
    docs = {o["_id"]: f"{o.get('title', '')} {o['text']}".strip() for o in map(
        json.loads, (beir / "corpus.jsonl").read_text().splitlines())}
    cache = ROOT / ".run/models"
    fp32, int8 = OnnxEncoder(cache), OnnxEncoder(cache, int8=True)
    key = hashlib.sha256(json.dumps([fp32.graph.name, list(docs.items())]).encode())
    path = RESULTS / "quality-cache" / f"int8-docs-{key.hexdigest()[:20]}.npy"
    if path.exists():
        vectors = np.load(path)
    else:
        print(f"encoding {len(docs)} documents (fp32, once; cached in {path})", flush=True)
        texts, vectors = list(docs.values()), np.zeros((len(docs), fp32.dim), np.float32)
        for i in range(0, len(texts), 256):
            vectors[i:i + 256] = fp32.encode(texts[i:i + 256])
            print(f"  {i + 256}/{len(texts)}", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    index = faiss.IndexFlatIP(fp32.dim)
    index.add(vectors)
    ids, qids = list(docs), list(queries)
    halves = {"all": qids, "even (tune)": qids[0::2], "odd (held out)": qids[1::2]}
    results: dict[str, Any] = {"collection": f"{beir.name}/{split}", "docs": len(docs),
                               "queries": len(queries)}
    vectors_by = {}
    for name, encoder in (("fp32", fp32), ("int8", int8)):
        started = time.process_time()
        vectors_by[name] = encoder.encode(list(queries.values()))
        cpu_ms = (time.process_time() - started) * 1000 / len(queries)
        _, found = index.search(vectors_by[name], 100)
        run = {q: [ids[i] for i in row if i >= 0] for q, row in zip(qids, found, strict=True)}
        results[name] = {half: evaluate({q: qrels[q] for q in members}, run, (10, 100))
                         for half, members in halves.items()} | {"query_cpu_ms": cpu_ms}
    cosines = np.sum(vectors_by["fp32"] * vectors_by["int8"], axis=1)
    results["cosine_min"], results["cosine_mean"] = float(cosines.min()), float(cosines.mean())
    print(f"\n{results['collection']}: {len(docs)} documents, {len(queries)} judged queries; "
          f"query vectors int8 vs fp32: cosine min {cosines.min():.4f}, mean "
          f"{cosines.mean():.4f}")
    print(f"{'queries':<16} {'graph':<6} {'NDCG@10':>8} {'R@10':>8} {'R@100':>8} "
          f"{'dNDCG@10':>9}")
    for half in halves:
        base = results["fp32"][half]["NDCG@10"]
        for name in ("fp32", "int8"):
            m = results[name][half]
            print(f"{half:<16} {name:<6} {m['NDCG@10']:8.4f} {m['Recall@10']:8.4f} "
                  f"{m['Recall@100']:8.4f} {m['NDCG@10'] - base:+9.4f}")
    print(f"query encoding, CPU ms per question (batches of all queries): fp32 "
          f"{results['fp32']['query_cpu_ms']:.2f}, int8 {results['int8']['query_cpu_ms']:.2f}")
    out = RESULTS / "int8-quality.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_query", description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=24)
    ap.add_argument("--clients", type=int, nargs="+",
                    help="concurrencies (default 1 8 32; with --retrieve 1 8)")
    ap.add_argument("--seconds", type=float, default=8.0, help="Query load per level and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stream-seconds", type=float, default=0.0,
                    help="StreamQuery load per level and round (0: none)")
    ap.add_argument("--configs", nargs="+", choices=[*CONFIGS, *ENCODER_CONFIGS],
                    help=f"which to run (default: all of the set); {BASELINE!r} (or with "
                         f"--encoder {ENCODER_BASELINE!r}) always runs")
    ap.add_argument("--encoder", action="store_true",
                    help="compare encoder runtimes and the sentence shortlist, not batching")
    ap.add_argument("--cold", action="store_true",
                    help="sentence cache off: every Query encodes its answer's sentences")
    ap.add_argument("--generator", choices=["none", *SHAPES], default="none",
                    help="answer with a random-weight GPT-2 of this shape, built now (no "
                         "weights can be downloaded here): its cost is real, its text is not")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--onnx-threads", type=int, nargs="*", default=[],
                    help="with --retrieve: one more worker per count of encoder threads "
                         "(0: one per core)")
    ap.add_argument("--retrieve", action="store_true",
                    help="measure Retrieve (chunks, no answer) instead, wait-free batching only")
    ap.add_argument("--tuning", action="store_true",
                    help="with --retrieve: the int8 query graph vs fp32 vs int8 with dense-only "
                         "search, three one-process meshes, caches off; also cold Query")
    ap.add_argument("--search-path", action="store_true",
                    help="with --retrieve: local (in-process) search vs the broker path, on "
                         "two one-process meshes, instead of the encoder baseline")
    ap.add_argument("--cache", action="store_true",
                    help="the answer cache on vs off on one-process meshes, Query under "
                         "Zipf-distributed repeated questions (scripts/benchlib/query_cache.py)")
    ap.add_argument("--questions", type=int, default=200,
                    help="with --cache: distinct questions in the workload")
    ap.add_argument("--zipf", type=float, default=1.1,
                    help="with --cache: the Zipf exponent of question popularity")
    ap.add_argument("--update-every", type=float, default=0.0,
                    help="with --cache: update one document every this many seconds during "
                         "the load (0: never)")
    ap.add_argument("--broker", action="store_true",
                    help="with --cache: also both with the search forced through the broker")
    ap.add_argument("--int8-quality", type=Path, metavar="BEIR_DIR",
                    help="nDCG@10 with int8 vs fp32 question vectors over the same fp32 "
                         "document vectors, in process (no mesh)")
    args = ap.parse_args()
    if args.int8_quality is not None:
        return main_int8_quality(args.int8_quality)
    args.clients = args.clients or ([1, 8] if args.retrieve or args.cache else [1, 8, 32])
    if args.cache:
        return main_cache(args)
    if args.retrieve:
        if args.tuning:
            return main_tuning(args)
        return main_search_path(args) if args.search_path else main_retrieve(args)
    if args.generator == "none":
        args.max_new_tokens = 0  # extractive answers: no word cap
    elif args.encoder:
        ap.error("--encoder compares extractive answers: leave --generator out")
    sets, baseline = (ENCODER_CONFIGS, ENCODER_BASELINE) if args.encoder else (CONFIGS, BASELINE)
    names = [n for n in sets if args.configs is None or n in args.configs or n == baseline]
    configs = {n: (list(sets[n][0]), dict(sets[n][1])) for n in names}
    if args.cold:
        for _, env in configs.values():
            env["STREAMRAG_INFERENCE_SENTENCE_CACHE_SIZE"] = "0"
    with tempfile.TemporaryDirectory() as models, tempfile.TemporaryDirectory() as tmp:
        if args.generator != "none":
            print(f"building a random-weight GPT-2 ({args.generator}) ...", flush=True)
            lm = build_tiny_lm(Path(models) / f"random-gpt2-{args.generator}",
                               shape=args.generator)
            for name, (_, env) in configs.items():
                env.update(GEN_CONFIGS[name], STREAMRAG_INFERENCE_GENERATOR_PATH=str(lm),
                           STREAMRAG_INFERENCE_ANSWER_MODE="generative")
        else:  # extractive answers, as this benchmark has always measured them
            for _, env in configs.values():
                env["STREAMRAG_INFERENCE_GENERATOR_BUNDLED"] = "false"
        first, (_, first_env) = next(iter(configs.items()))
        port = free_port()
        mesh_env = {**first_env, "STREAMRAG_INFERENCE_METRICS_PORT": str(port)}
        print(f"starting a mesh, its inference worker with {first} ...", flush=True)
        extra: list[Child] = []
        with isolated(Path(tmp), ANVIL, env=mesh_env) as mesh:
            try:
                servers = [Server(first, mesh.grpc_target, f"http://127.0.0.1:{port}/metrics")]
                for name, (module, env) in list(configs.items())[1:]:
                    print(f"starting an inference worker with {name} ({module}, {env})",
                          flush=True)
                    child, server = spawn_inference(mesh, name, module, env)
                    extra.append(child)
                    servers.append(server)
                asyncio.run(measure(servers, mesh.bootstrap, args))
            finally:
                stop(extra, 15)
    table = print_table(servers, args.clients, baseline)
    out = RESULTS / "query.json"
    out.parent.mkdir(exist_ok=True)
    out = out.with_name(("query" if args.generator == "none" else f"query-{args.generator}")
                        + ("-encoder" if args.encoder else "") + ("-cold" if args.cold else "")
                        + ".json")
    rounds = {s.name: {c: [{k: v for k, v in r.items() if k != "latencies"} for r in rows]
                       for c, rows in s.rows.items()} for s in servers}
    out.write_text(json.dumps({"configs": configs, "generator": args.generator,
                               "args": vars(args), "results": table, "rounds": rounds},
                              indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
