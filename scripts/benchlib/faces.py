"""Retrieve over the HTTP/JSON face beside gRPC, on one one-process mesh, in the same run.

The mesh's inference serves both faces from the same servicer (services/inference/api/
rest.py), so the difference measured is the face's own: aiohttp and JSON against grpc.aio
and protobuf. Closed-loop clients ask distinct questions (no cache helps either face), at
each concurrency (default 1 and 8 clients), faces alternating first by round so machine
noise falls on both alike. Prints QPS and p50/p99 pooled over the rounds with the ratios to
gRPC (the baseline) and writes bench-results/faces.json.

    scripts/bench_faces [--seconds 8] [--rounds 3] [--clients 1 8] [--docs 24]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import grpc

from scripts.benchlib.paths import ANVIL, RESULTS
from scripts.benchlib.query import BATCHED, Server, print_retrieve, retrieve_loop
from scripts.benchlib.stats import pct
from scripts.benchlib.workload import TOPICS, produce_corpus, wait_searchable
from services.cli.mesh import isolated
from shared.rpc.streamrag.v1 import inference_pb2_grpc as pb_grpc

GRPC, HTTP = "gRPC", "HTTP/JSON"


async def http_loop(session: aiohttp.ClientSession, url: str, clients: int,
                    seconds: float) -> dict[str, Any]:
    """retrieve_loop's closed loop and row, over POST /v1/retrieve."""
    latencies: list[float] = []
    embeds: list[float] = []
    gathers: list[float] = []
    errors = 0
    end = time.monotonic() + seconds
    tag = uuid.uuid4().hex[:6]

    async def client(n: int) -> None:
        nonlocal errors
        i = 0
        while time.monotonic() < end:
            topic = TOPICS[(n + i) % len(TOPICS)]
            body = {"question": f"why did {topic} return 502 errors (client {n}, {tag} "
                                f"question {i})?", "top_k": 5}
            i += 1
            t0 = time.perf_counter()
            async with session.post(url, json=body) as response:
                reply = await response.json()
            if response.status != 200:
                errors += 1
                continue
            latencies.append((time.perf_counter() - t0) * 1000)
            embeds.append(reply["timings"]["embed_ms"])
            gathers.append(reply["timings"]["retrieval_ms"])

    started = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(clients)))
    elapsed = time.monotonic() - started
    return {"clients": clients, "n": len(latencies), "errors": errors, "seconds": elapsed,
            "latencies": latencies, "qps": len(latencies) / elapsed, "p50": pct(latencies, 50),
            "p99": pct(latencies, 99), "embed_p50": pct(embeds, 50),
            "gather_p50": pct(gathers, 50)}


async def measure(grpc_target: str, http_url: str, bootstrap: str,
                  args: argparse.Namespace) -> list[Server]:
    source = f"bench-{uuid.uuid4().hex[:6]}"
    await produce_corpus(bootstrap, args.docs, source)
    servers = [Server(GRPC, grpc_target, ""), Server(HTTP, http_url, "")]
    url = f"{http_url}/v1/retrieve"
    async with grpc.aio.insecure_channel(grpc_target) as channel, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        stub = pb_grpc.InferenceStub(channel)
        await wait_searchable(stub, source, args.docs)
        await retrieve_loop(stub, 2, 2)  # warm-up, both faces
        await http_loop(session, url, 2, 2)
        for r in range(args.rounds):
            for clients in args.clients:
                for s in (servers if r % 2 == 0 else servers[::-1]):
                    row = await (retrieve_loop(stub, clients, args.seconds) if s.name == GRPC
                                 else http_loop(session, url, clients, args.seconds))
                    s.rows.setdefault(clients, []).append(row)
                    print(f"  round {r + 1} [{s.name}] {clients:>3} clients: {row['qps']:6.1f}"
                          f" QPS, p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms, errors "
                          f"{row['errors']}", flush=True)
    return servers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=24)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--seconds", type=float, default=8.0, help="load per level and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print("starting a one-process mesh serving gRPC and HTTP ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp, \
            isolated(Path(tmp), ANVIL, env=dict(BATCHED)) as mesh:
        servers = asyncio.run(measure(mesh.grpc_target, mesh.http_url, mesh.bootstrap, args))
    table = print_retrieve(servers, args.clients, GRPC)
    print(f"baseline: {GRPC!r}, the same inference worker's gRPC face, rounds alternating "
          "which face goes first. QPS, p50, p99 pooled over the rounds; encode, gather: the "
          "server's own p50 (ms), the same work behind both faces.")
    out = RESULTS / "faces.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "results": table}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
