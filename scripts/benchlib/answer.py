"""Extractive answer quality and cost: every candidate encoded (the baseline) vs a BM25 shortlist.

On a BEIR collection with relevance judgements (default $BEIR/scifact-train:
claims as questions, abstracts as chunks), each question gets five chunks: the dense top 5
of a pool of abstracts (its judged-relevant ones plus distractors), the relevant one put in
place of the fifth when retrieval missed it. The extractive answer's pure steps then pick
sentences by:
  dense      every candidate sentence encoded, ranked by cosine (what Query did before)
  short-M    the M best candidates by BM25 (services/inference/answer/lexical.py) encoded
             and ranked by cosine
  bm25       BM25 alone, nothing encoded
Quality: gold@1 / gold@3, the share of questions whose first (any of the first three)
answer sentence comes from a judged-relevant chunk; agree@1, the share whose first sentence
is the dense one. Cost: sentences encoded per question. Writes bench-results/answer.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from scripts.benchlib.paths import BEIR, RESULTS
from services.inference.answer import extractive, lexical
from shared.encoder.runtime import load_encoder

HITS = 5


def load(root: Path, questions: int, distractors: int, seed: int) -> tuple[
        list[tuple[str, set[str]]], dict[str, str]]:
    qrels: dict[str, set[str]] = {}
    for line in (root / "qrels/train.tsv").read_text().splitlines()[1:]:
        qid, cid, score = line.split("\t")
        if int(score) > 0:
            qrels.setdefault(qid, set()).add(cid)
    queries = {}
    for line in (root / "queries.jsonl").read_text().splitlines():
        q = json.loads(line)
        if q["_id"] in qrels:
            queries[q["_id"]] = q["text"]
    corpus = {}
    for line in (root / "corpus.jsonl").read_text().splitlines():
        d = json.loads(line)
        corpus[d["_id"]] = f"{d.get('title', '')}. {d['text']}"[:1500]  # ~ one 254-token chunk
    rng = random.Random(seed)
    picked = rng.sample(sorted(queries), min(questions, len(queries)))
    gold = {c for q in picked for c in qrels[q] if c in corpus}
    others = rng.sample(sorted(set(corpus) - gold), distractors)
    pool = {c: corpus[c] for c in sorted(gold) + others}
    return [(queries[q], qrels[q] & set(pool)) for q in picked], pool


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_answer", description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path,
                    default=BEIR / "scifact-train")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--distractors", type=int, default=200)
    ap.add_argument("--shortlists", type=int, nargs="+", default=[4, 8, 12, 16])
    ap.add_argument("--runtime", default="auto", help="encoder runtime (shared/encoder/runtime.py)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    questions, pool = load(args.data, args.questions, args.distractors, args.seed)
    encoder = load_encoder(runtime=args.runtime, device="cpu")
    ids = list(pool)
    print(f"encoding {len(ids)} chunks and {len(questions)} questions ({encoder.runtime}) ...",
          flush=True)
    chunk_vectors = encoder.encode([pool[c] for c in ids])
    methods = ["dense", *(f"short-{m}" for m in args.shortlists), "bm25"]
    gold1 = dict.fromkeys(methods, 0)
    gold3 = dict.fromkeys(methods, 0)
    agree = dict.fromkeys(methods, 0)
    encoded = dict.fromkeys(methods, 0)
    candidates_total, started = 0, time.perf_counter()
    for question, relevant in questions:
        qv = encoder.encode([question])[0]
        top = [ids[i] for i in np.argsort(-(chunk_vectors @ qv))[:HITS]]
        if not relevant & set(top):
            top[-1] = sorted(relevant)[0]
        good = {n for n, c in enumerate(top, start=1) if c in relevant}
        candidates = extractive.candidate_sentences([pool[c] for c in top])
        texts = [c.text for c in candidates]
        candidates_total += len(texts)
        vectors = encoder.encode(texts)
        picks = {"dense": extractive.select_sentences(qv, vectors, 3)}
        encoded["dense"] += len(texts)
        for m in args.shortlists:
            rows = lexical.shortlist(question, texts, m)
            picks[f"short-{m}"] = [rows[i] for i in
                                   extractive.select_sentences(qv, vectors[rows], 3)]
            encoded[f"short-{m}"] += len(rows)
        scores = lexical.bm25(question, texts)
        picks["bm25"] = sorted(range(len(texts)), key=lambda i: (-scores[i], i))[:3]
        for name, rows in picks.items():
            cited = [candidates[i].citation for i in rows]
            gold1[name] += bool(cited) and cited[0] in good
            gold3[name] += bool(good & set(cited))
            agree[name] += bool(rows) and rows[0] == picks["dense"][0]
    n = len(questions)
    print(f"\n{n} questions, {candidates_total / n:.1f} candidate sentences each "
          f"({time.perf_counter() - started:.0f} s)")
    print(f"{'method':<10} {'gold@1':>7} {'gold@3':>7} {'agree@1':>8} {'encoded/q':>10}")
    rows_out = []
    for name in methods:
        row = {"method": name, "gold@1": gold1[name] / n, "gold@3": gold3[name] / n,
               "agree@1": agree[name] / n, "encoded_per_question": encoded[name] / n}
        rows_out.append(row)
        print(f"{name:<10} {row['gold@1']:7.3f} {row['gold@3']:7.3f} {row['agree@1']:8.3f} "
              f"{row['encoded_per_question']:10.1f}")
    print("baseline: dense (every candidate encoded), on the same questions and chunks.")
    out = RESULTS / "answer.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                               "questions": n, "results": rows_out}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
