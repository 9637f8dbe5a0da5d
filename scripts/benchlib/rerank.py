"""The rerank stage's cost: per-query latency and QPS of a cross-encoder over N candidates.

Usage: scripts/bench_rerank [--model PATH] [--candidates 20] [--clients 1 8] [--seconds 8]
                            [--corpus $BEIR/scifact-train] [--device auto]
                            [--vs-encoder ROUNDS]

Runs services/inference/rerank's RerankStage (its batcher, the Hugging Face runtime) in
process: each client reranks one question's candidates after another, so concurrent
clients share batches as the service's queries do. The candidates are the first documents
of a BEIR corpus ("title\\ntext", cut to --max-length tokens with the question). Without
--model it builds a cross-encoder of ms-marco-MiniLM-L-6-v2's shape (BERT, 6 layers, 384
wide, 12 heads) with random weights and the MiniLM tokenizer: what such a model costs, not
what it scores (no cross-encoder weights can be had offline here). --vs-encoder times,
rounds interleaved, one query's rerank beside encoding the same candidates with the MiniLM
sentence encoder (torch, same max length): a ratio that holds on a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from scripts.benchlib.paths import BEIR
from scripts.benchlib.tinyreranker import build_tiny_reranker
from services.inference.rerank.model import CrossEncoder
from services.inference.rerank.stage import RerankStage
from services.inference.telemetry.metrics import InferenceMetrics
from shared.batching.queue import BatchLimits
from shared.contract.records import SearchHit


def _hits(corpus: Path, n: int) -> list[SearchHit]:
    out = []
    with open(corpus / "corpus.jsonl") as lines:
        for i, line in enumerate(lines):
            if i == n:
                break
            doc = json.loads(line)
            out.append(SearchHit(chunk_id=f"c{i}", doc_id=doc["_id"], version=1,
                                 score=1.0 - i / 1000, event_time=0.0, text=doc["text"],
                                 title=doc.get("title", ""), domain="", source=""))
    return out


def _questions(corpus: Path, n: int) -> list[str]:
    with open(corpus / "queries.jsonl") as lines:
        return [json.loads(line)["text"] for _, line in zip(range(n), lines, strict=False)]


async def _level(stage: RerankStage, questions: list[str], hits: list[SearchHit],
                 clients: int, seconds: float) -> tuple[list[float], float]:
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    async def client(c: int) -> None:
        i = c
        while time.perf_counter() < end:
            started = time.perf_counter()
            await stage.rerank(questions[i % len(questions)], hits, top_k=10)
            latencies.append(time.perf_counter() - started)
            i += clients
    started = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return latencies, time.perf_counter() - started


async def _main(args: argparse.Namespace) -> None:
    model = args.model
    if model is None:
        model = build_tiny_reranker(Path(tempfile.mkdtemp()) / "minilm-shaped", shape="minilm")
    scorer = CrossEncoder(model, args.device, args.max_length, args.token_budget)
    scorer.score([("warm-up", "warm-up")])
    stage = RerankStage(args.candidates, BatchLimits(args.token_budget, args.max_batch), 256,
                        args.max_length, InferenceMetrics())
    stage.attach(scorer)
    stage.start()
    hits, questions = _hits(args.corpus, args.candidates), _questions(args.corpus, 64)
    print(f"model {model.name} on {scorer.device}, {args.candidates} candidates, "
          f"max_length {args.max_length}")
    try:
        if args.vs_encoder:
            await _vs_encoder(stage, questions, hits, args)
        print("| clients | QPS | p50 ms | p99 ms | batches | queries/batch |")
        print("|---|---|---|---|---|---|")
        for clients in args.clients:
            before = len(stage.batcher.batches)
            lat, wall = await _level(stage, questions, hits, clients, args.seconds)
            batches = stage.batcher.batches[before:]
            ms = sorted(x * 1000 for x in lat)
            p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
            print(f"| {clients} | {len(ms) / wall:.1f} | {statistics.median(ms):.1f} | "
                  f"{p99:.1f} | {len(batches)} | {sum(batches) / len(batches):.2f} |")
    finally:
        await stage.stop()


async def _vs_encoder(stage: RerankStage, questions: list[str], hits: list[SearchHit],
                      args: argparse.Namespace) -> None:
    from shared.encoder.embedder import Encoder
    from shared.encoder.passage import passage

    encoder = Encoder(device=args.device, max_length=args.max_length)
    texts = [passage(h.title, h.text) for h in hits]
    encoder.encode(texts[:1])
    rerank_ms, encode_ms = [], []
    for i in range(args.vs_encoder):
        started = time.perf_counter()
        await stage.rerank(questions[i % len(questions)], hits, top_k=10)
        rerank_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await asyncio.to_thread(encoder.encode, texts)
        encode_ms.append((time.perf_counter() - started) * 1000)
    ratios = [r / e for r, e in zip(rerank_ms, encode_ms, strict=True)]
    print(f"rerank {statistics.median(rerank_ms):.0f} ms vs encoding the {len(texts)} "
          f"candidates {statistics.median(encode_ms):.0f} ms (medians of {args.vs_encoder} "
          f"interleaved rounds); ratio median {statistics.median(ratios):.2f} "
          f"(range {min(ratios):.2f}-{max(ratios):.2f})")


def main() -> None:
    p = argparse.ArgumentParser(prog="bench_rerank", description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=None)
    p.add_argument("--candidates", type=int, default=20)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--corpus", type=Path, default=BEIR / "scifact-train")
    p.add_argument("--device", default="auto")
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--token-budget", type=int, default=16_384)
    p.add_argument("--vs-encoder", type=int, default=0, metavar="ROUNDS")
    asyncio.run(_main(p.parse_args()))


if __name__ == "__main__":
    main()
