"""Wrong facts in served answers: extractive, generated, and generated with the support check.

`scripts/bench_answer --facts` writes invented-fact documents (a service with a made-up name
that keeps something for N days, times out after M seconds and follows a named policy),
asks a question about one fact of one service with that service's document and two other
services' documents as the passages (so an answer can mix them up), and judges every answer
against the question's own document:

  right   the answer holds the judged value (the number, or the policy's name)
  wrong   the answer states a number or a capitalised name that the question's document
          does not hold (an invented or changed number, another service's fact)

Modes, on the same questions and passages in one run:
  extractive       the quoted answer (services/inference/answer/extractive.py)
  generated        the bundled SmolLM2-135M-Instruct, greedy, served as written
  served           what Query serves now: the generated answer where the support check
                   (services/inference/answer/citations.py) grounds every sentence in its
                   sources, else the extractive answer (generation_min_support = 1.0)

Seeds 1-999 are for trying changes; the default seed is held out (never tuned on).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
from dataclasses import dataclass

import numpy as np

from scripts.benchlib.answer import quote, write_all
from scripts.benchlib.paths import RESULTS
from services.inference.answer import citations
from shared.encoder.runtime import load_encoder

HELDOUT_SEED = 515151
NAMES = ("Tamarin", "Osprey", "Kestrel", "Marmot", "Quokka", "Heron", "Lynx", "Ibis", "Wombat",
         "Gecko", "Bison", "Tapir", "Caracal", "Dingo", "Egret", "Ferret", "Jackal", "Okapi",
         "Puffin", "Serval", "Vole", "Walrus", "Yak", "Zebu")
THINGS = ("cached pages", "audit logs", "session tokens", "build artefacts", "trace spans",
          "upload chunks", "invoice drafts", "search snapshots")
POLICY_A = ("Lazy", "Eager", "Tiered", "Rolling", "Sliding", "Frozen", "Staggered", "Greedy")
POLICY_B = ("Eviction", "Expiry", "Compaction", "Purge", "Sweep", "Retention")
TEAMS = ("payments", "search", "billing", "identity", "storage", "messaging")


@dataclass(frozen=True)
class Service:
    name: str
    team: str
    thing: str
    days: int
    seconds: int
    policy: str

    def document(self) -> str:
        return (f"{self.name} is the {self.team} team's service for {self.thing}. "
                f"{self.name} keeps {self.thing} for {self.days} days before they are deleted. "
                f"A request to {self.name} times out after {self.seconds} seconds. "
                f"{self.name} follows the {self.policy} Policy when its disk fills up.")


@dataclass(frozen=True)
class Ask:
    question: str
    gold: str  # the judged value as the document writes it
    passages: tuple[str, ...]  # the question's document first, then two others
    own: str


def services(seed: int, n: int) -> list[Service]:
    rng = random.Random(f"facts/{seed}")
    names = rng.sample(NAMES, n)
    return [Service(name, rng.choice(TEAMS), rng.choice(THINGS), rng.randint(3, 95),
                    rng.randint(2, 120), f"{rng.choice(POLICY_A)} {rng.choice(POLICY_B)}")
            for name in names]


def asks(seed: int, n: int) -> list[Ask]:
    rng = random.Random(f"facts-asks/{seed}")
    pool = services(seed, min(n, len(NAMES)))
    out = []
    for k in range(n):
        s = pool[k % len(pool)]
        others = rng.sample([o for o in pool if o is not s], 2)
        kind = k % 3
        if kind == 0:
            q, gold = f"For how many days does {s.name} keep {s.thing}?", str(s.days)
        elif kind == 1:
            q, gold = f"After how many seconds does a request to {s.name} time out?", \
                str(s.seconds)
        else:
            q, gold = f"Which policy does {s.name} follow when its disk fills up?", s.policy
        docs = [s.document(), *(o.document() for o in others)]
        out.append(Ask(q, gold, tuple(docs), s.document()))
    return out


def judge(ask: Ask, answer: str) -> tuple[bool, bool]:
    """(right, wrong): the judged value is in the answer; a sentence of the answer states
    facts (numbers, capitalised names) that no one document holds together: invented,
    changed, or one service's name with another's number. A sentence quoted whole from any
    document is true of that document, and not wrong."""
    body = citations.MARKER.sub("", answer)
    right = re.search(rf"(?<![\w.]){re.escape(ask.gold)}(?![\w])", body) is not None
    wrong = any(all(citations.unsupported_facts(s, doc) for doc in ask.passages)
                for s in citations.sentences(body))
    return right, wrong


def overlap_only(answer: str, cited: tuple[str, ...], ids: list[str], texts: list[str]) -> float:
    """supported_share as the check computed it before facts counted: word overlap alone."""
    said = citations.sentences(answer)
    if not said:
        return 1.0
    by_id = dict(zip(ids, texts, strict=True))
    passages = [citations.content_words(by_id[c]) for c in cited if c in by_id]
    return sum(any(citations.coverage(s, " ".join(p)) >= citations.SUPPORT for p in passages)
               for s in said) / len(said)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench_answer --facts", description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=HELDOUT_SEED,
                    help="held out: %(default)s (the default); tuning seeds: 1-999")
    ap.add_argument("--questions", type=int, default=24)
    ap.add_argument("--max-new", type=int, default=48, help="new tokens per generated answer")
    ap.add_argument("--show", action="store_true", help="print every answer and its verdict "
                    "(tuning seeds only)")
    args = ap.parse_args(argv)
    if args.show and args.seed == HELDOUT_SEED:
        ap.error("--show prints answers: only for tuning seeds (1-999), never the held-out one")
    held = args.seed == HELDOUT_SEED
    questions = asks(args.seed, args.questions)
    print(f"{len(questions)} questions on invented facts, seed {args.seed} "
          f"({'held out' if held else 'tuning'})", flush=True)
    encoder = load_encoder(device="cpu")
    quoted = []
    for a in questions:
        qv = np.asarray(encoder.encode([a.question]))[0]
        quoted.append(quote(encoder, a.question, qv, list(a.passages)))
    written = asyncio.run(write_all([(a.question, list(a.passages)) for a in questions],
                                    args.max_new))
    ids = ["own", "other-1", "other-2"]
    rows: dict[str, list[tuple[bool, bool, float]]] = {"extractive": [], "generated": [],
                                                       "served": []}
    replaced = 0
    before: list[bool] = []  # wrong, yet fully supported by the overlap-only check
    for a, q, w in zip(questions, quoted, written, strict=True):
        texts = list(a.passages)
        qc = citations.check_quoted(q, ids, texts)
        gc = citations.check_generated(w.answer.text, ids, texts, w.answer.shown or (1, 2, 3))
        rows["extractive"].append((*judge(a, q), qc.supported_share))
        rows["generated"].append((*judge(a, w.answer.text), gc.supported_share))
        before.append(judge(a, w.answer.text)[1]
                      and overlap_only(w.answer.text, gc.cited_ids, ids, texts) >= 1.0)
        if args.show:
            print(f"\nQ: {a.question} (gold {a.gold})\n  quoted: {q!r} {judge(a, q)}\n"
                  f"  generated: {w.answer.text!r} {judge(a, w.answer.text)} "
                  f"support {gc.supported_share:.2f}")
        if gc.supported_share >= 1.0:
            rows["served"].append(rows["generated"][-1])
        else:
            replaced += 1
            rows["served"].append(rows["extractive"][-1])
    n = len(questions)
    print(f"\n{'mode':<11} {'right':>7} {'wrong fact':>11} {'marked fully supported':>23} "
          f"{'wrong yet fully supported':>26}")
    out = {}
    for mode, r in rows.items():
        right = sum(x[0] for x in r)
        wrong = sum(x[1] for x in r)
        full = sum(x[2] >= 1.0 for x in r)
        wrong_full = sum(x[1] and x[2] >= 1.0 for x in r)
        out[mode] = {"right": right, "wrong": wrong, "fully_supported": full,
                     "wrong_but_fully_supported": wrong_full}
        print(f"{mode:<11} {right:>3}/{n:<3} {wrong:>5}/{n:<5} {full:>13}/{n:<9} "
              f"{wrong_full:>16}/{n:<9}")
    print(f"generated answers with a wrong fact marked fully supported by the previous, "
          f"overlap-only check: {sum(before)}/{n} (by the check now: "
          f"{out['generated']['wrong_but_fully_supported']}/{n})")
    print(f"served: {n - replaced} generated answers kept, {replaced} replaced by the "
          "extractive answer (support below 1.0); the rows above are one run, same questions")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "answer-facts.json"
    path.write_text(json.dumps({"seed": args.seed, "held_out": held, "questions": n,
                                "max_new": args.max_new, "replaced": replaced,
                                "wrong_but_fully_supported_before": sum(before),
                                "modes": out}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
