"""Planted PII in every form, ordinary business tokens and speed, this checkout beside a baseline.

`scripts/bench_redaction --forms` runs the redactor of this checkout and the one of a
baseline commit on the same generated documents, in one run.

    scripts/bench_redaction --forms --quick            # a few minutes
    scripts/bench_redaction --forms --json bench-results/redaction-forms.json
    scripts/bench_redaction --forms --commit 9f63ce8 --no-baseline   # one commit alone

On a held-out seed by default (scripts/benchlib/pii_planted.py: HELDOUT_SEEDS are never
tuned on). Each side is a worker process (scripts/benchlib/pii_worker.py) running its own
tree's Redactor with default settings: this checkout as it is (uncommitted changes
included) or `--commit`, and `--baseline-commit` (default 9f63ce8, before the detection
work) unpacked by `git archive` into a temporary directory. Both get the same batches,
one after the other, the order alternating batch by batch, so that load on a shared
machine falls on both alike. Prints recall per form, type and locale (and per form x type x
locale), per variant, false positives per kind of ordinary token, and docs/s with the
ratio to the baseline; the rules are in scripts/benchlib/pii_scoring.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from scripts.benchlib import pii_planted as pp
from scripts.benchlib import pii_scoring as sc
from scripts.benchlib.paths import BEIR, ROOT
from scripts.benchlib.pii_business import BusinessDoc, abstracts, business
from scripts.benchlib.pii_tables import Side, report, summary
from scripts.benchlib.pii_values import LOCALES

BASELINE = "9f63ce8"
WORKER = "scripts/benchlib/pii_worker.py"
CORPUS = ROOT.parent / "shared/data/beir/scifact-train/corpus.jsonl"


def unpack(commit: str, into: Path) -> Path:
    """`commit`'s tree (read with git archive: the repository is not changed), with this
    checkout's worker in it; `into` is a new directory."""
    tree = into
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    shutil.copy(ROOT / WORKER, tree / WORKER)
    return tree


def _env(tree: Path) -> dict[str, str]:
    """The environment without redaction settings (both sides run the defaults), with the
    tree first on the path."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRAG_REDACTION_")}
    return keep | {"PYTHONPATH": str(tree)}


class Worker:
    """A redactor process of one tree, answering a batch of texts per line."""

    def __init__(self, name: str, tree: Path, log: Path) -> None:
        self.name, self.log = name, log
        self.stderr = log.open("w")
        # From the tree itself, which `python -m` puts first on sys.path.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.benchlib.pii_worker"], cwd=tree,
            env=_env(tree),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            encoding="utf-8")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            tail = self.log.read_text()[-3000:]
            msg = f"the {self.name} redactor exited ({self.proc.wait()}); its log:\n{tail}"
            raise RuntimeError(msg)
        return dict(json.loads(line))

    def ready(self) -> float:
        return float(self._read()["load_s"])

    def redact(self, texts: list[str]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"texts": texts}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.stderr.close()


@dataclass
class Corpus:
    planted: list[pp.PlantedDoc]
    business: list[BusinessDoc]
    abstracts: list[str]

    def batches(self, size: int) -> list[tuple[str, list[int]]]:
        out = []
        for name, docs in (("planted", self.planted), ("business", self.business),
                           ("abstracts", self.abstracts)):
            out += [(name, list(range(i, min(i + size, len(docs)))))
                    for i in range(0, len(docs), size)]
        return out

    def text(self, name: str, i: int) -> str:
        doc = getattr(self, name)[i]
        return doc if isinstance(doc, str) else str(doc.text)


def score(side: Side, corpus: Corpus, name: str, idx: list[int], reply: dict[str, Any]) -> None:
    found = reply["findings"] or [None] * len(idx)
    for i, red, fs in zip(idx, reply["texts"], found, strict=True):
        text = corpus.text(name, i)
        mask, explained = sc.replaced(text, red, None if fs is None else
                                      [(a, b, e) for a, b, e in fs])
        side.explained[0] += explained
        side.explained[1] += 1
        if name == "planted":
            side.outcomes += sc.outcomes(corpus.planted[i], mask)
            side.redacted[i] = red
        elif name == "business":
            side.tokens += sc.changed_tokens(corpus.business[i], mask)
            side.containers.append((corpus.business[i].container, any(mask)))
        else:
            n, hit = sc.changed_words(text, mask)
            side.words = [side.words[0] + n, side.words[1] + hit, side.words[2] + 1,
                          side.words[3] + (red != text)]
    t = side.time.setdefault(name, [0.0, 0.0, 0.0, 0.0])
    t[0] += len(idx)
    t[1] += sum(len(corpus.text(name, i)) for i in idx)
    t[2] += reply["wall_s"]
    t[3] += reply["cpu_s"]


def run(corpus: Corpus, workers: dict[str, Worker], batch: int, out: TextIO) -> dict[str, Side]:
    sides = {name: Side(name) for name in workers}
    plan = corpus.batches(batch)
    total = sum(len(idx) for _, idx in plan)
    done, started, shown = 0, time.perf_counter(), 0.0
    for k, (name, idx) in enumerate(plan):
        texts = [corpus.text(name, i) for i in idx]
        order = list(workers) if k % 2 == 0 else list(workers)[::-1]
        for side in order:
            score(sides[side], corpus, name, idx, workers[side].redact(texts))
        done += len(idx)
        now = time.perf_counter()
        if now - shown >= 10 or done == total:
            shown = now
            rates = ", ".join(f"{s.name} {s.rate(2):.1f} docs/s ({s.rate(3):.1f} per CPU-s)"
                              for s in sides.values())
            left = (now - started) / done * (total - done)
            print(f"  redacted {done}/{total} documents: {rates}; ~{left:.0f} s left",
                  file=out, flush=True)
    return sides


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench_redaction --forms",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=pp.HELDOUT_SEEDS[0],
                    help="held-out seeds: %(default)s and up; tuning seeds: 1-999")
    ap.add_argument("--per-cell", type=int, help="values per (form, type, locale) and per "
                    "variant (default 5)")
    ap.add_argument("--business", type=int, help="business documents (default 200)")
    ap.add_argument("--abstracts", type=int, help="abstracts of --corpus (default 200)")
    ap.add_argument("--corpus", type=Path, help="a BEIR corpus.jsonl (default: the shared "
                    "SciFact copy, else $BEIR/scifact-train)")
    ap.add_argument("--locales", nargs="+", choices=list(LOCALES), default=list(LOCALES))
    ap.add_argument("--commit", help="bench this commit as 'current' instead of the checkout")
    ap.add_argument("--baseline-commit", default=BASELINE, help="the redactor compared "
                    "against (default %(default)s, before the detection work)")
    ap.add_argument("--no-baseline", action="store_true", help="run only the current side")
    ap.add_argument("--cells", choices=["current", "baseline", "both"], default="current",
                    help="whose form x type x locale table to print")
    ap.add_argument("--batch", type=int, default=16, help="documents per redact_texts call")
    ap.add_argument("--quick", action="store_true", help="defaults of 1 value per cell, 30 "
                    "business documents, 20 abstracts: a few minutes")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--show-leaks", type=int, default=0, metavar="N", help="print N leaked "
                    "values with their documents (tuning seeds only)")
    args = ap.parse_args(argv)
    for name, full, quick in (("per_cell", 5, 1), ("business", 200, 30), ("abstracts", 200, 20)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.show_leaks and args.seed in pp.HELDOUT_SEEDS:
        ap.error("--show-leaks prints values: only for tuning seeds (1-999), never held-out ones")
    return args


def show_leaks(corpus: Corpus, side: Side, n: int) -> None:
    """The first n leaked values of `side`, each with the document it was planted in."""
    where = {id(p): i for i, d in enumerate(corpus.planted) for p in d.planted}
    for o in [o for o in side.outcomes if not o.caught][:n]:
        p, i = o.planted, where[id(o.planted)]
        print(f"\n--- leaked ({side.name}): {p.form}/{p.variant} {p.type} {p.locale} "
              f"{p.kind}: {p.value!r} written {p.rendered!r}\n{corpus.planted[i].text}\n"
              f"--- redacted:\n{side.redacted[i]}")


def corpus_path(args: argparse.Namespace) -> Path | None:
    for path in (args.corpus, CORPUS, BEIR / "scifact-train/corpus.jsonl"):
        if path is not None and path.exists():
            return Path(path)
    return None


def main(argv: list[str]) -> int:
    args = parse(argv)
    held = args.seed in pp.HELDOUT_SEEDS
    print(f"generating: seed {args.seed} ({'held out, never tuned on' if held else 'tuning'}),"
          f" {args.per_cell} per cell ...", flush=True)
    planted = pp.generate(args.seed, args.per_cell, args.locales)
    path = corpus_path(args)
    corpus = Corpus(planted, business(args.seed, args.business),
                    abstracts(path, args.seed, args.abstracts) if path else [])
    values = sum(len(d.planted) for d in planted)
    print(f"  {len(planted)} planted documents ({values} values), {len(corpus.business)} "
          f"business documents, {len(corpus.abstracts)} abstracts"
          + ("" if path else " (no corpus found)"), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-forms-") as tmp:
        trees: dict[str, Path] = {}
        if not args.no_baseline:
            trees[f"baseline {args.baseline_commit}"] = unpack(args.baseline_commit,
                                                               Path(tmp) / "baseline")
        trees[args.commit or "current"] = (unpack(args.commit, Path(tmp) / "current")
                                           if args.commit else ROOT)
        workers = {n: Worker(n, t, Path(tmp) / f"worker-{k}.log")
                   for k, (n, t) in enumerate(trees.items())}
        try:
            for n, w in workers.items():
                print(f"  {n}: redactor loaded in {w.ready():.1f} s", flush=True)
            sides = run(corpus, workers, args.batch, sys.stdout)
        finally:
            for w in workers.values():
                w.close()
    print(report(sides, args.cells))
    if args.show_leaks:
        show_leaks(corpus, sides[list(sides)[-1]], args.show_leaks)
    for s in sides.values():
        ok, docs = s.explained
        if ok < docs:
            print(f"{s.name}: {docs - ok} of {docs} documents scored by alignment (its findings "
                  "did not explain its output)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "seed": args.seed, "held_out": held, "per_cell": args.per_cell,
            "baseline_commit": None if args.no_baseline else args.baseline_commit,
            "current": args.commit or "working tree", "sides": summary(sides)}, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
