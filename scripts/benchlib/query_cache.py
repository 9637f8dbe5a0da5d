"""bench_query --cache: the answer cache on and off under repeated, Zipf-distributed questions.

One-process meshes side by side (the embedded default), each fed the same corpus: "off"
(STREAMRAG_INFERENCE_ANSWER_CACHE=false, the baseline) and "on" (the default); with
--broker also both with the search forced through the broker
(STREAMRAG_INFERENCE_LOCAL_SEARCH=false), where a cached answer is reused only after a
search has returned the same hits. Closed-loop clients ask Query from `--questions`
distinct questions, question i drawn with probability proportional to 1/i^s (Zipf,
`--zipf`), the same seeded sequence on every mesh; each level starts from questions no
cache has seen, so its warm-up misses count. With --update-every S, one corpus document
is updated every S seconds on every mesh during the load (the cache's invalidations).
Each call is classed by its own timings: hit (nothing searched or answered), revalidated
(searched, answer reused), miss (answered afresh; "off" calls are all misses); the
server's counters give the invalidations (a stored answer whose fresh hits differed).
Prints QPS, p50/p99 per class and the QPS ratio to "off" at the same concurrency; writes
bench-results/query-cache.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import tempfile
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
from aiokafka import AIOKafkaProducer

from scripts.benchlib.paths import ANVIL, RESULTS
from scripts.benchlib.stats import pct
from scripts.benchlib.workload import TEXT, TOPICS, produce_corpus, wait_searchable
from services.cli.mesh import free_port, isolated
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

BASELINE = "off"
CACHE, LOCAL = "STREAMRAG_INFERENCE_ANSWER_CACHE", "STREAMRAG_INFERENCE_LOCAL_SEARCH"
QUIET = {"STREAMRAG_INFERENCE_GENERATOR_BUNDLED": "false"}  # extractive answers
CONFIGS = {BASELINE: {CACHE: "false"}, "on": {CACHE: "true"}}
BROKER_CONFIGS = {"off, broker": {CACHE: "false", LOCAL: "false"},
                  "on, broker": {CACHE: "true", LOCAL: "false"}}
ASPECTS = ("disk", "certificate", "deploy", "timeout", "memory", "dns", "quota", "latency",
           "retries", "rollback", "alerts", "config", "traffic", "cache", "index")


def questions(n: int, tag: str) -> list[str]:
    """n distinct questions about the corpus's topics."""
    return [f"what happened to {TOPICS[i % len(TOPICS)]} {ASPECTS[i // len(TOPICS) % len(ASPECTS)]}"
            f" {tag} #{i}?" for i in range(n)]


def zipf_weights(n: int, s: float) -> list[float]:
    return [1.0 / (i + 1) ** s for i in range(n)]


def classify(response: pb.QueryResponse, cache_on: bool) -> str:
    t = response.timings
    if not cache_on or t.answer_ms > 0:
        return "miss"
    return "hit" if t.retrieval_ms == 0 and t.embed_ms == 0 else "revalidated"


async def zipf_loop(stub: pb_grpc.InferenceStub, cache_on: bool, clients: int,
                    seconds: float, asked: list[str], weights: list[float],
                    seed: int) -> dict[str, Any]:
    by_class: dict[str, list[float]] = {"hit": [], "revalidated": [], "miss": []}
    errors = 0
    end = time.monotonic() + seconds

    cumulative = list(itertools.accumulate(weights))  # a draw in O(log n)

    async def client(n: int) -> None:
        nonlocal errors
        rng = random.Random(seed * 1000 + n)  # the same sequence on every mesh
        while time.monotonic() < end:
            question = rng.choices(asked, cum_weights=cumulative)[0]
            t0 = time.perf_counter()
            try:
                response = await stub.Query(pb.QueryRequest(question=question, top_k=5),
                                            timeout=60)
            except grpc.aio.AioRpcError:
                errors += 1
                continue
            by_class[classify(response, cache_on)].append((time.perf_counter() - t0) * 1000)

    started = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(clients)))
    elapsed = time.monotonic() - started
    return {"clients": clients, "seconds": elapsed, "errors": errors, "latencies": by_class}


async def updater(bootstraps: list[str], docs: int, source: str, every_s: float) -> None:
    """Update one corpus document every `every_s` seconds on every mesh, until cancelled."""
    producers = [AIOKafkaProducer(bootstrap_servers=b) for b in bootstraps]
    for p in producers:
        await p.start()
    try:
        for r in range(10**9):
            await asyncio.sleep(every_s)
            i = r % docs
            now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            doc = {"id": f"{source}-{i}", "source": source, "event_time": now,
                   "text": TEXT.format(t=TOPICS[i % len(TOPICS)], i=i) + f" Revision {r}."}
            for p in producers:
                await p.send_and_wait("docs.raw.v1", json.dumps(doc).encode(),
                                      key=doc["id"].encode())
    finally:
        for p in producers:
            await p.stop()


def invalidations(metrics_url: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=5) as response:
        text = response.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "streamrag_inference_answer_cache_total"
               and s.labels.get("outcome") == "invalidated")


async def measure(names: list[str], targets: list[str], bootstraps: list[str],
                  metrics: list[str], args: argparse.Namespace,
                  ) -> dict[str, dict[int, list[dict[str, Any]]]]:
    source = f"bench-{uuid.uuid4().hex[:6]}"
    for b in bootstraps:
        await produce_corpus(b, args.docs, source)
    channels = [grpc.aio.insecure_channel(t) for t in targets]
    stubs = [pb_grpc.InferenceStub(ch) for ch in channels]
    rows: dict[str, dict[int, list[dict[str, Any]]]] = {n: {} for n in names}
    weights = zipf_weights(args.questions, args.zipf)
    try:
        for name, stub in zip(names, stubs, strict=True):
            print(f"  [{name}] waiting until the corpus is searchable", flush=True)
            await wait_searchable(stub, source, args.docs)
        for r in range(args.rounds):
            for clients in args.clients:
                asked = questions(args.questions, uuid.uuid4().hex[:6])  # new to every cache
                k = r % len(names)
                order = list(zip(names, stubs, metrics, strict=True))
                for name, stub, metrics_url in order[k:] + order[:k]:
                    before = invalidations(metrics_url)
                    updates = (asyncio.create_task(updater(bootstraps, args.docs, source,
                                                           args.update_every))
                               if args.update_every > 0 else None)
                    try:
                        row = await zipf_loop(stub, "on" in name.split(",")[0], clients,
                                              args.seconds, asked, weights, r)
                    finally:
                        if updates is not None:
                            updates.cancel()
                            with contextlib.suppress(asyncio.CancelledError):
                                await updates
                    row["invalidated"] = invalidations(metrics_url) - before
                    rows[name].setdefault(clients, []).append(row)
                    n = sum(len(v) for v in row["latencies"].values())
                    print(f"  round {r + 1} [{name}] {clients:>2} clients: "
                          f"{n / row['seconds']:6.1f} QPS, hits {len(row['latencies']['hit'])}, "
                          f"revalidated {len(row['latencies']['revalidated'])}, misses "
                          f"{len(row['latencies']['miss'])} (invalidated "
                          f"{row['invalidated']:.0f}), errors {row['errors']}", flush=True)
    finally:
        for ch in channels:
            await ch.close()
    return rows


def pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    lat = {c: [x for r in rows for x in r["latencies"][c]] for c in ("hit", "revalidated",
                                                                      "miss")}
    every = [x for xs in lat.values() for x in xs]
    n = len(every)
    out: dict[str, Any] = {"n": n, "errors": sum(r["errors"] for r in rows),
                           "qps": n / sum(r["seconds"] for r in rows),
                           "p50": pct(every, 50), "p99": pct(every, 99),
                           "invalidated": sum(r["invalidated"] for r in rows),
                           "hit_rate": len(lat["hit"]) / max(1, n),
                           "reuse_rate": (len(lat["hit"]) + len(lat["revalidated"])) / max(1, n)}
    for c, xs in lat.items():
        out[c] = {"n": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99)}
    return out


def print_table(rows: dict[str, dict[int, list[dict[str, Any]]]], clients: list[int],
                baseline: str) -> dict[str, list[dict[str, Any]]]:
    table = {name: [pooled(by[c]) | {"clients": c} for c in clients]
             for name, by in rows.items()}
    base = {r["clients"]: r for r in table[baseline]}
    print(f"\n{'cache':<12} {'clients':>7} {'QPS':>7} {'ratio':>7} {'p50':>7} {'p99':>7} "
          f"{'hit%':>6} {'reuse%':>7} {'hit p50/p99':>14} {'reval p50/p99':>14} "
          f"{'miss p50/p99':>14} {'inval':>6} {'calls':>6} {'err':>4}")

    def pp(c: dict[str, Any]) -> str:
        return f"{c['p50']:.1f}/{c['p99']:.1f}" if c["n"] else "-"
    for name, rs in table.items():
        for r in rs:
            print(f"{name:<12} {r['clients']:>7} {r['qps']:7.1f} "
                  f"{r['qps'] / base[r['clients']]['qps']:6.2f}x {r['p50']:7.1f} "
                  f"{r['p99']:7.1f} {100 * r['hit_rate']:6.1f} {100 * r['reuse_rate']:7.1f} "
                  f"{pp(r['hit']):>14} {pp(r['revalidated']):>14} {pp(r['miss']):>14} "
                  f"{r['invalidated']:>6.0f} {r['n']:>6} {r['errors']:>4}")
    return table


def main_cache(args: argparse.Namespace) -> int:
    configs = {**CONFIGS, **(BROKER_CONFIGS if args.broker else {})}
    ports = {name: free_port() for name in configs}
    envs = {name: {**QUIET, **env, "STREAMRAG_INFERENCE_METRICS_PORT": str(ports[name])}
            for name, env in configs.items()}
    print(f"starting {len(envs)} one-process meshes ({', '.join(envs)}) ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        meshes = [stack.enter_context(isolated(Path(tmp) / name.replace(", ", "-"), ANVIL,
                                               env=env)) for name, env in envs.items()]
        rows = asyncio.run(measure(list(envs), [m.grpc_target for m in meshes],
                                   [m.bootstrap for m in meshes],
                                   [f"http://127.0.0.1:{ports[n]}/metrics" for n in envs], args))
    table = print_table(rows, args.clients, BASELINE)
    print(f"baseline: {BASELINE!r} (the answer cache off) on its own one-process mesh, rounds "
          f"interleaved. {args.questions} questions, Zipf s={args.zipf}, each level from "
          "questions no cache has seen; updates every "
          f"{args.update_every or 'never'} s. ratio: QPS over 'off' at the same clients; "
          "hit%: calls served unsearched; reuse%: hits plus revalidated; latencies in ms.")
    out = RESULTS / ("query-cache" + ("-updates" if args.update_every > 0 else "") + ".json")
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"configs": envs, "args": vars(args), "results": table},
                              indent=2, default=str))
    print(f"wrote {out}")
    return 0
