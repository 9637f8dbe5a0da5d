"""Encoder runtimes side by side: torch fp32 (the baseline) vs ONNX Runtime on CPU, same weights.

At the batch shapes the mesh runs (a question alone; a batch of questions; an answer's
shortlisted sentences, and all ~45 candidates as before the shortlist; the embedding
stage's 2048-token chunk batches) and at each thread
count, both runtimes take turns call by call, so a busy machine slows both alike. Prints
sequences/s (median and best call), the ratio to torch, and the lowest cosine between the
two runtimes' vectors (on texts of mixed lengths, so padding is exercised). Writes
bench-results/encoder.json. The ONNX graph is exported on first use (shared/encoder/onnx.py).

--passes [--corpus DIR --docs N]: how the embedding stage runs a batch's forward passes on
ONNX, on chunked documents (a BEIR corpus, or synthetic text): one thread (the baseline),
one session of two intra-op threads, and one 1-thread pass per core side by side (the
default), at two pass sizes, on an idle machine and with one core kept busy by another
process (as redaction keeps it). Prints docs/s and the ratio to one thread, rounds
interleaved. Writes bench-results/encoder-passes.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from scripts.benchlib.paths import RESULTS
from shared.encoder.runtime import load_encoder
from shared.encoder.tokenizer import TextTokenizer

WORDS = [
    "the", "checkout", "service", "returned", "HTTP", "502", "errors", "after", "a",
    "deploy", "until", "on-call", "rotated", "the", "expired", "TLS", "certificate", "on",
    "the", "gateway", "and", "error", "rates", "fell", "back",
]
# name -> (sequences, words per sequence, calls per runtime)
SHAPES = {"question": (1, 12, 40), "questions x16": (16, 12, 8),
          "answer shortlist x8": (8, 24, 12), "answer all x45": (45, 24, 4),
          "chunks 8x254": (8, 190, 3)}


def texts(n: int, words: int) -> list[str]:
    # Lengths vary by up to a third, so every batch pads.
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(words - (i * words // 3) // n))
            for i in range(n)]


def chunked(corpus: Path | None, docs: int, tokenizer: TextTokenizer) -> list[str]:
    """The passages the embedding stage encodes for `docs` documents (title in front)."""
    from services.chunking.documents import DocumentChunker
    from services.chunking.settings import ChunkingSettings
    from shared.contract.records import RedactedDocument
    from shared.encoder.passage import passage

    pairs = []
    if corpus is not None:
        with (corpus / "corpus.jsonl").open() as f:
            for line in f:
                obj = json.loads(line)
                pairs.append((obj.get("title", ""), obj["text"]))
                if len(pairs) == docs:
                    break
    else:
        pairs = [("", text) for text in texts(docs, 180)]
    s = ChunkingSettings()
    chunker = DocumentChunker(tokenizer, s.max_tokens, s.overlap_tokens)
    return [passage(title, c.text) for i, (title, text) in enumerate(pairs)
            for c in chunker.chunk(RedactedDocument(doc_id=f"d{i}", version=1, title=title,
                                                    text=text, source="bench", event_time=0,
                                                    ingest_time=0)).chunks]


def passes_main(args: argparse.Namespace) -> int:
    import subprocess

    from shared.encoder.onnx import OnnxEncoder

    cache = Path(".run/models")
    encoders = {"1 thread": OnnxEncoder(cache, threads=1),
                "1 session x 2 threads": OnnxEncoder(cache, threads=2),
                "2 passes x 1 thread": OnnxEncoder(cache, threads=1, workers=2)}
    batch = chunked(args.corpus, args.docs, encoders["1 thread"].tokenizer)
    for e in encoders.values():
        e.encode(batch[:4])
    print(f"{len(batch)} passages of {args.docs} documents; docs/s (median of "
          f"{args.rounds} rounds, interleaved)")
    rows = []
    for load in ("idle", "one core busy"):
        hog = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
               if load != "idle" else None)
        try:
            for budget in (1024, 2048):
                times: dict[str, list[float]] = {k: [] for k in encoders}
                for _ in range(args.rounds):
                    for name, e in encoders.items():
                        t0 = time.perf_counter()
                        e.encode(batch, max_batch_tokens=budget)
                        times[name].append(time.perf_counter() - t0)
                rate = {k: args.docs / statistics.median(v) for k, v in times.items()}
                rows.append({"load": load, "pass_tokens": budget, **rate})
                print(f"{load:<14} passes of {budget:>5} tokens: " + "  ".join(
                    f"{k} {v:6.2f} ({v / rate['1 thread']:.2f}x)" for k, v in rate.items()),
                    flush=True)
        finally:
            if hog is not None:
                hog.kill()
    out = RESULTS / "encoder-passes.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    print(f"wrote {out}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_encoder", description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    ap.add_argument("--passes", action="store_true", help="the embedding stage's passes")
    ap.add_argument("--corpus", type=Path, default=None, help="a BEIR folder (--passes)")
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.passes:
        return passes_main(args)
    rows = []
    print(f"{'shape':<20} {'thr':>3} {'torch seq/s':>11} {'onnx seq/s':>10} {'ratio':>6} "
          f"{'best torch':>10} {'best onnx':>9} {'min cos':>8}")
    for threads in args.threads:
        encoders = {name: load_encoder(name, "cpu", threads) for name in ("torch", "onnx")}
        for shape in args.shapes:
            n, words, calls = SHAPES[shape]
            batch = texts(n, words)
            ref = encoders["torch"].encode(batch)
            cos = float(np.min(np.sum(ref * encoders["onnx"].encode(batch), axis=1)))
            times: dict[str, list[float]] = {"torch": [], "onnx": []}
            for _ in range(calls):
                for name, encoder in encoders.items():
                    t0 = time.perf_counter()
                    encoder.encode(batch)
                    times[name].append(time.perf_counter() - t0)
            rate = {k: n / statistics.median(v) for k, v in times.items()}
            best = {k: n / min(v) for k, v in times.items()}
            row = {"shape": shape, "threads": threads, "sequences": n, "calls": calls,
                   "torch_seq_s": rate["torch"], "onnx_seq_s": rate["onnx"],
                   "torch_best": best["torch"], "onnx_best": best["onnx"], "min_cosine": cos}
            rows.append(row)
            print(f"{shape:<20} {threads:>3} {rate['torch']:11.1f} {rate['onnx']:10.1f} "
                  f"{rate['onnx'] / rate['torch']:5.2f}x {best['torch']:10.1f} "
                  f"{best['onnx']:9.1f} {cos:8.6f}", flush=True)
    print("seq/s: sequences per second over the median call (best: the fastest call); "
          "baseline torch fp32, calls interleaved in this run.")
    out = RESULTS / "encoder.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
