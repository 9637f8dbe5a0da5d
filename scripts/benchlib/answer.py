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
  short-M any  the same, without the rule that a sentence of another source than the best
             one's must come close to it (extractive.OTHER_SOURCE_FLOOR): the baseline
Quality: gold@1 / gold@3, the share of questions whose first (any of the first three)
answer sentence comes from a judged-relevant chunk; on-topic, the mean share of an
answer's sentences that come from a judged-relevant chunk (an answer padded with another
document's sentences scores low); agree@1, the share whose first sentence is the dense
one. Cost: sentences encoded per question. --slice picks the questions' half (held-out,
the headline, or tune, the only one to choose a rule's numbers on). Writes
bench-results/answer.json.

--faithfulness instead answers each question both ways, as inference does, and checks the
answers' citations (services/inference/answer/citations.py):
  extractive   the shortlist of 8, 3 sentences quoted with their "[n]" (the default settings)
  generative   the bundled SmolLM2-135M-Instruct, greedy, --max-new tokens, one at a time
Per mode: gold cited (the share of answers citing a judged-relevant chunk), supported (the
mean share of answer sentences grounded in a cited chunk), uncited (the share naming no
passage), how citations were found (cited_by) and latency per answer. A claim is asked as
"Is it true that <claim>?" (retrieval and both answers see that question). The questions
come from one slice of a fixed split by hash of the query id: held-out (the default, and
the headline) or tune, the only one to try prompt changes on. Writes
bench-results/faithfulness.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from scripts.benchlib import generate
from scripts.benchlib.paths import BEIR, RESULTS
from scripts.benchlib.progress import Progress
from scripts.benchlib.stats import pct
from services.inference.answer import citations, extractive, lexical
from services.inference.answer.citations import CitationCheck
from services.inference.answer.generative.answerer import GenerativeAnswerer
from services.inference.telemetry.metrics import InferenceMetrics
from shared.encoder.runtime import SentenceEncoder, load_encoder

HITS = 5
SLICES = ("tune", "held-out")
SHORTLIST, SENTENCES = 8, 3  # the extractive answer's defaults (InferenceSettings)
Question = tuple[str, str, set[str]]  # query id, claim, judged-relevant chunk ids


def slice_of(qid: str) -> str:
    """The query's fixed slice: half tune, half held-out, by a hash of its id alone."""
    return SLICES[hashlib.sha256(qid.encode()).digest()[0] % 2]


def as_question(claim: str) -> str:
    """"Is it true that <claim>?": the claim's first letter lowered unless it starts an
    acronym or symbol ("ALDH1 ...", "p53 ..." stay)."""
    body = claim.strip().rstrip(".")
    if len(body) > 1 and body[0].isupper() and body[1].islower():
        body = body[0].lower() + body[1:]
    return f"Is it true that {body}?"


def load(root: Path, questions: int, distractors: int, seed: int, part: str | None = None,
         ) -> tuple[list[Question], dict[str, str]]:
    """Questions (of slice `part` when given) and a pool: their gold chunks and distractors."""
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
    ids = sorted(q for q in queries if part is None or slice_of(q) == part)
    picked = rng.sample(ids, min(questions, len(ids)))
    gold = {c for q in picked for c in qrels[q] if c in corpus}
    others = rng.sample(sorted(set(corpus) - gold), distractors)
    pool = {c: corpus[c] for c in sorted(gold) + others}
    return [(q, queries[q], qrels[q] & set(pool)) for q in picked], pool


def top_chunks(qv: np.ndarray, chunk_vectors: np.ndarray, ids: list[str],
               relevant: set[str]) -> list[str]:
    """The dense top HITS, a relevant chunk put in place of the last when retrieval missed."""
    top = [ids[i] for i in np.argsort(-(chunk_vectors @ qv))[:HITS]]
    if not relevant & set(top):
        top[-1] = sorted(relevant)[0]
    return top


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench_answer", description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path,
                    default=BEIR / "scifact-train")
    ap.add_argument("--questions", type=int, default=None,
                    help="default 100, 40 with --faithfulness")
    ap.add_argument("--distractors", type=int, default=200)
    ap.add_argument("--shortlists", type=int, nargs="+", default=[4, 8, 12, 16])
    ap.add_argument("--runtime", default="auto", help="encoder runtime (shared/encoder/runtime.py)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--faithfulness", action="store_true",
                    help="extractive vs generative answers' citations (see above)")
    ap.add_argument("--slice", choices=SLICES, default="held-out",
                    help="the questions' slice (held-out: the headline; tune: to choose on)")
    ap.add_argument("--other-source-floor", type=float, default=extractive.OTHER_SOURCE_FLOOR,
                    help="the rule's floor for sentences of another source (to tune)")
    ap.add_argument("--max-new", type=int, default=64,
                    help="with --faithfulness: new tokens per generated answer")
    args = ap.parse_args()
    faithful = args.faithfulness
    args.questions = args.questions or (40 if faithful else 100)
    questions, pool = load(args.data, args.questions, args.distractors, args.seed, args.slice)
    encoder = load_encoder(runtime=args.runtime, device="cpu")
    ids = list(pool)
    print(f"encoding {len(ids)} chunks and {len(questions)} questions ({encoder.runtime}) ...",
          flush=True)
    chunk_vectors = encoder.encode([pool[c] for c in ids])
    if faithful:
        return faithfulness(args, questions, pool, encoder, chunk_vectors)
    any_source = f"short-{SHORTLIST} any"
    methods = ["dense", *(f"short-{m}" for m in args.shortlists), any_source, "bm25"]
    gold1 = dict.fromkeys(methods, 0)
    gold3 = dict.fromkeys(methods, 0)
    agree = dict.fromkeys(methods, 0)
    encoded = dict.fromkeys(methods, 0)
    on_topic: dict[str, float] = dict.fromkeys(methods, 0.0)
    floor = args.other_source_floor
    candidates_total, started = 0, time.perf_counter()
    for _, question, relevant in questions:
        qv = encoder.encode([question])[0]
        top = top_chunks(qv, chunk_vectors, ids, relevant)
        good = {n for n, c in enumerate(top, start=1) if c in relevant}
        candidates = extractive.candidate_sentences([pool[c] for c in top])
        texts = [c.text for c in candidates]
        candidates_total += len(texts)
        vectors = encoder.encode(texts)
        sources = [c.citation for c in candidates]
        picks = {"dense": extractive.select_sentences(qv, vectors, 3, sources, floor)}
        encoded["dense"] += len(texts)
        for m in args.shortlists:
            rows = lexical.shortlist(question, texts, m)
            picks[f"short-{m}"] = [rows[i] for i in extractive.select_sentences(
                qv, vectors[rows], 3, [sources[r] for r in rows], floor)]
            encoded[f"short-{m}"] += len(rows)
            if m == SHORTLIST:
                picks[any_source] = [rows[i] for i in
                                     extractive.select_sentences(qv, vectors[rows], 3)]
                encoded[any_source] += len(rows)
        scores = lexical.bm25(question, texts)
        picks["bm25"] = sorted(range(len(texts)), key=lambda i: (-scores[i], i))[:3]
        for name, rows in picks.items():
            cited = [candidates[i].citation for i in rows]
            gold1[name] += bool(cited) and cited[0] in good
            gold3[name] += bool(good & set(cited))
            agree[name] += bool(rows) and rows[0] == picks["dense"][0]
            on_topic[name] += sum(c in good for c in cited) / len(cited) if cited else 0.0
    n = len(questions)
    print(f"\n{n} questions of the {args.slice} slice, {candidates_total / n:.1f} candidate "
          f"sentences each, other-source floor {floor:g} "
          f"({time.perf_counter() - started:.0f} s)")
    print(f"{'method':<13} {'gold@1':>7} {'gold@3':>7} {'on-topic':>9} {'agree@1':>8} "
          f"{'encoded/q':>10}")
    rows_out = []
    for name in methods:
        row = {"method": name, "gold@1": gold1[name] / n, "gold@3": gold3[name] / n,
               "on_topic": on_topic[name] / n, "agree@1": agree[name] / n,
               "encoded_per_question": encoded[name] / n}
        rows_out.append(row)
        print(f"{name:<13} {row['gold@1']:7.3f} {row['gold@3']:7.3f} {row['on_topic']:9.3f} "
              f"{row['agree@1']:8.3f} {row['encoded_per_question']:10.1f}")
    print(f"baselines: dense (every candidate encoded) and {any_source} (the default "
          "shortlist without the other-source rule), on the same questions and chunks.")
    out = RESULTS / "answer.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                               "questions": n, "results": rows_out}, indent=2))
    print(f"wrote {out}")
    return 0


def quote(encoder: SentenceEncoder, question: str, qv: np.ndarray, texts: list[str]) -> str:
    """The extractive answer's pure steps, as services/inference/answer/extractor.py runs
    them (cold: no sentence cache)."""
    candidates = extractive.candidate_sentences(texts)
    keep = lexical.shortlist(question, [c.text for c in candidates], SHORTLIST)
    candidates = [candidates[i] for i in keep]
    vectors = encoder.encode([c.text for c in candidates])
    picked = extractive.select_sentences(qv, vectors, SENTENCES,
                                         [c.citation for c in candidates])
    return "".join(extractive.answer_pieces([candidates[i] for i in picked]))


async def write_all(asks: list[tuple[str, list[str]]], max_new: int,
                    ) -> list[generate.Streamed]:
    """Generated answers to `asks`, one after another (batch size 1)."""
    lm, load_s = generate.load(generate.settings(1, max_new))
    print(f"{lm.model_id} loaded in {load_s:.1f} s", flush=True)
    s = generate.settings(1, max_new)
    answerer = GenerativeAnswerer(lm, s, InferenceMetrics())
    answerer.start()
    progress = Progress("generative", len(asks), "answers")
    out = []
    try:
        for question, texts in asks:
            out.append(await generate.stream_one(answerer, s, question, texts, max_new))
            progress.add()
    finally:
        await answerer.stop()
    return out


def report(checks: list[CitationCheck], gold: list[set[str]], seconds: list[float],
           ) -> dict[str, Any]:
    n = len(checks)
    return {"gold_cited": sum(bool(g & set(c.cited_ids)) for c, g in
                              zip(checks, gold, strict=True)) / n,
            "supported": statistics.fmean(c.supported_share for c in checks),
            "uncited": sum(c.uncited for c in checks) / n,
            "cited_by": dict(Counter(c.cited_by for c in checks)),
            "latency_p50_s": pct(seconds, 50), "latency_p95_s": pct(seconds, 95)}


def faithfulness(args: argparse.Namespace, questions: list[Question], pool: dict[str, str],
                 encoder: SentenceEncoder, chunk_vectors: np.ndarray) -> int:
    ids = list(pool)
    asked = [as_question(claim) for _, claim, _ in questions]
    qvs = encoder.encode(asked)
    tops = [top_chunks(qv, chunk_vectors, ids, rel)
            for qv, (_, _, rel) in zip(qvs, questions, strict=True)]
    gold = [rel for _, _, rel in questions]
    checks: dict[str, list[CitationCheck]] = {"extractive": [], "generative": []}
    seconds: dict[str, list[float]] = {"extractive": [], "generative": []}
    quoted = []
    for question, qv, top in zip(asked, qvs, tops, strict=True):
        texts = [pool[c] for c in top]
        started = time.perf_counter()
        quoted.append(quote(encoder, question, qv, texts))
        seconds["extractive"].append(time.perf_counter() - started)
        checks["extractive"].append(citations.check_quoted(quoted[-1], top, texts))
    written = asyncio.run(write_all([(q, [pool[c] for c in top])
                                     for q, top in zip(asked, tops, strict=True)], args.max_new))
    for w, top in zip(written, tops, strict=True):
        shown = w.answer.shown or ()
        checks["generative"].append(citations.check_generated(
            w.answer.text, top, [pool[c] for c in top], shown))
        seconds["generative"].append(w.total_s)
    rows = {mode: report(checks[mode], gold, seconds[mode]) for mode in checks}
    shown_gold = [bool(g & {top[i - 1] for i in (w.answer.shown or ())})
                  for w, top, g in zip(written, tops, gold, strict=True)]
    rows["generative"]["gold_shown"] = sum(shown_gold) / len(shown_gold)
    rows["extractive"]["gold_shown"] = 1.0  # it reads all five chunks
    n = len(questions)
    print(f"\n{n} questions of the {args.slice} slice"
          + (" (the headline; nothing was tuned on it)" if args.slice == "held-out" else "")
          + f", {HITS} chunks each, a gold chunk among them; asked as \"Is it true that ...?\"")
    print(f"{'mode':<11} {'gold cited':>10} {'supported':>9} {'uncited':>8} {'gold shown':>10} "
          f"{'p50 s':>6} {'p95 s':>6}  cited_by")
    for mode, r in rows.items():
        by = ", ".join(f"{k} {v}" for k, v in sorted(r["cited_by"].items()))
        print(f"{mode:<11} {r['gold_cited']:>10.3f} {r['supported']:>9.3f} {r['uncited']:>8.3f} "
              f"{r['gold_shown']:>10.3f} {r['latency_p50_s']:>6.2f} {r['latency_p95_s']:>6.2f}"
              f"  {by}")
    print("gold shown: a gold chunk made it into what the mode read (the prompt's token budget "
          "may leave passages out).")
    for q, w in list(zip(asked, written, strict=True))[:3]:
        print(f"  e.g. {q}\n    -> {w.answer.text!r}")
    out = RESULTS / "faithfulness.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({
        "args": {k: str(v) for k, v in vars(args).items()}, "questions": n, "results": rows,
        "answers": [{"qid": qid, "question": q, "extractive": e, "generative": w.answer.text}
                    for (qid, _, _), q, e, w in zip(questions, asked, quoted, written,
                                                    strict=True)]}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
