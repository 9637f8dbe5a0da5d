"""Drift detection on real text: SciFact abstracts and generated incident reports, embedded
with the project's encoder once and cached on disk, streamed window by window.

Usage: scripts/bench_drift [--corpus $BEIR/scifact-train] [--slice held|tune]
                           [--stationary 2000] [--trials 100] [--cache DIR]

Measures, on one slice of SciFact (held: the one the defaults were not tuned on), the
detection delay of a switch to incident reports (at a window start and halfway into one)
and to SciFact's cancer abstracts, and the false-alarm rate of a stationary stream. Windows
hold 25-40 documents drawn at random from the slice. Prints the figures as JSON and writes
them to bench-results/drift-<slice>.json. tests/unit/retrieval/drift uses the same corpora
and streams at a smaller scale.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from scripts.benchlib.paths import RESULTS, ROOT
from services.retrieval.drift.detector import Detector, DriftConfig, Sample
from services.retrieval.drift.sample import words
from shared.contract.records import DriftReport

# SciFact (BEIR layout) is kept outside the repository, in the machine's shared folder:
# beside the checkout, or where STREAMRAG_SCIFACT_DIR says (a clone elsewhere finds it
# through the variable or the machine's fixed place).
SCIFACT_PLACES = (ROOT.parent / "shared" / "data" / "beir" / "scifact-train",
                  Path("/work/shared/data/beir/scifact-train"))


def find_scifact() -> Path | None:
    """The SciFact folder, or None where this machine has none."""
    named = os.environ.get("STREAMRAG_SCIFACT_DIR")
    places = ((Path(named),) if named else ()) + SCIFACT_PLACES
    return next((p for p in places if (p / "corpus.jsonl").is_file()), None)


SCIFACT = find_scifact()
MAX_TOKENS = 64  # a document's opening says its topic; short keeps the first run short
POOL = 300  # documents per slice


class Corpus:
    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        assert len(texts) == len(vectors)
        self.texts, self.vectors = texts, vectors

    def where(self, keep: list[bool]) -> Corpus:
        return Corpus([t for t, k in zip(self.texts, keep, strict=True) if k],
                      self.vectors[np.asarray(keep)])


def scifact_slices(corpus: Path | None = SCIFACT) -> tuple[list[str], list[str]]:
    """Two disjoint slices of SciFact in a fixed shuffled order: the first to tune on, the
    second held out (its figures are the ones docs/design/drift.md reports)."""
    if corpus is None:
        raise FileNotFoundError("SciFact not found: set STREAMRAG_SCIFACT_DIR to its folder "
                                f"(looked in {', '.join(map(str, SCIFACT_PLACES))})")
    with (corpus / "corpus.jsonl").open() as f:
        docs = [json.loads(line) for line in f]
    random.Random(26).shuffle(docs)
    texts = [f"{d['title']}. {d['text']}" for d in docs]
    return texts[:POOL], texts[POOL:2 * POOL]


SERVICES = ("payments-api", "checkout", "auth-gateway", "search-indexer", "billing-worker",
            "kafka-broker", "postgres-primary", "redis-cache", "cdn-edge", "notification-svc")
SYMPTOMS = ("returned HTTP 503 for {m} minutes", "p99 latency rose to {s} seconds",
            "dropped {n} messages from its queue", "restarted {n} times in a crash loop",
            "ran out of disk space on {host}", "lost its leader election on {host}",
            "rejected connections from {ip}", "served stale responses for {m} minutes")
CAUSES = ("an expired TLS certificate", "a bad configuration push", "a memory leak in the "
          "connection pool", "a full disk from unrotated logs", "a DNS resolution failure",
          "a schema migration that locked the orders table", "a noisy neighbour on the node",
          "a misconfigured autoscaling policy", "a deploy with a missing environment variable")
ACTIONS = ("rolled back the deploy", "failed over to the replica", "rotated the certificate",
           "drained the node and rescheduled pods", "raised the connection limit",
           "purged the cache", "added a disk alert", "paged the database team")


def incident_reports(count: int, seed: int) -> list[str]:
    """Post-mortem style incident reports: another domain than SciFact's abstracts."""
    from faker import Faker

    fake, rnd = Faker(), random.Random(seed)
    Faker.seed(seed)
    out = []
    for i in range(count):
        symptom = rnd.choice(SYMPTOMS).format(m=rnd.randint(2, 90), s=rnd.randint(2, 30),
                                              n=rnd.randint(3, 5000), host=fake.hostname(),
                                              ip=fake.ipv4())
        out.append(
            f"Incident INC-{rnd.randint(1000, 9999)}: {rnd.choice(SERVICES)} in "
            f"{rnd.choice(['eu-west-1', 'us-east-1', 'ap-south-1'])} {symptom} on "
            f"{fake.date_this_year()} after {rnd.choice(CAUSES)}. The on-call engineer "
            f"{fake.first_name()} {rnd.choice(ACTIONS)} and {rnd.choice(ACTIONS)}. "
            f"Customer impact: {rnd.randint(1, 40)}% of requests. Follow-up ticket "
            f"OPS-{i} tracks the alerting gap.")
    return out


def embed(texts: list[str], cache_dir: Path) -> np.ndarray:
    """Unit vectors of `texts`, from the cache when the same texts were embedded before."""
    from shared.encoder.model import MODEL_ID

    digest = hashlib.sha256(json.dumps([MODEL_ID, MAX_TOKENS, texts]).encode()).hexdigest()
    path = cache_dir / f"{digest[:24]}.npy"
    if path.exists():
        return np.load(path)
    from shared.encoder.embedder import Encoder

    vectors = np.asarray(Encoder(device="cpu", max_length=MAX_TOKENS).encode(texts))
    np.save(path, vectors)
    return vectors


WINDOW_S = 60.0
KEY = ("papers", "science", "all-MiniLM-L6-v2")
ONCOLOGY = re.compile(r"cancer|tumou?r|carcinoma|oncolog|metasta")
Plan = list[list[tuple[Corpus, int]]]  # per window: (corpus, how many documents) parts


def oncology_split(corpus: Corpus) -> tuple[Corpus, Corpus]:
    """The abstracts without and with cancer in them: a change of topic within one
    collection, harder to see than a change of collection."""
    onc = [bool(ONCOLOGY.search(t.lower())) for t in corpus.texts]
    return corpus.where([not k for k in onc]), corpus.where(onc)


def stream(windows: Plan, rnd: random.Random, config: DriftConfig | None = None,
           ) -> list[DriftReport]:
    """Each window's parts drawn at random without repeats within the window, at ingest
    times spread evenly over it; every window closed at the end."""
    detector = Detector(KEY, config or DriftConfig())
    reports: list[DriftReport] = []
    for k, parts in enumerate(windows):
        picks = [(c, i) for c, n in parts for i in rnd.sample(range(len(c.texts)), n)]
        for j, (corpus, i) in enumerate(picks):
            text = corpus.texts[i]
            at = (k + (j + 0.5) / len(picks)) * WINDOW_S
            reports += detector.add(Sample(f"{id(corpus)}-{i}", k, at, corpus.vectors[i],
                                           words(text), text[:60]))
    return reports + detector.tick((len(windows) + 1) * WINDOW_S + 60)


def drift_windows(reports: list[DriftReport]) -> list[int]:
    return [int(r.window_start // WINDOW_S) for r in reports if r.status == "drift"]


def sized(rnd: random.Random) -> int:
    return rnd.randint(25, 40)


def switched(before: Corpus, after: Corpus, rnd: random.Random, mid_window: bool,
             lead: int = 12) -> Plan:
    """`lead` windows of `before`, then `after`; the switch at a window's start or halfway
    into window `lead`."""
    head: Plan = [[(before, sized(rnd))] for _ in range(lead)]
    if mid_window:
        n = sized(rnd)
        head.append([(before, n // 2), (after, n - n // 2)])
    return head + [[(after, min(sized(rnd), len(after.texts)))] for _ in range(3)]


def mixed(before: Corpus, after: Corpus, rnd: random.Random, share: float,
          lead: int = 12) -> Plan:
    """`lead` windows of `before`, then windows of which `share` comes from `after`: a
    partial change (a new kind of document joining the old ones)."""
    head: Plan = [[(before, sized(rnd))] for _ in range(lead)]
    tail: Plan = []
    for _ in range(3):
        n = sized(rnd)
        m = min(round(n * share), len(after.texts))
        tail.append([(before, n - m), (after, m)])
    return head + tail


def switch_trials(before: Corpus, after: Corpus, trials: int, mid_window: bool,
                  seed: int = 0, lead: int = 12, share: float | None = None,
                  ) -> tuple[list[int | None], int, int]:
    """(delay in windows of the first event at or after the switch per trial, None where
    none came; events before the switch; windows judged before it). `share`: a partial
    switch (mixed) instead of a whole one."""
    delays: list[int | None] = []
    early = judged = 0
    for trial in range(trials):
        rnd = random.Random(seed + trial)
        plan = (switched(before, after, rnd, mid_window, lead) if share is None
                else mixed(before, after, rnd, share, lead))
        reports = stream(plan, rnd)
        flagged = drift_windows(reports)
        early += sum(w < lead for w in flagged)
        judged += sum(r.status in ("stable", "drift") and r.window_start < lead * WINDOW_S
                      for r in reports)
        delays.append(min((w - lead for w in flagged if w >= lead), default=None))
    return delays, early, judged


def stationary(corpus: Corpus, windows: int, seed: int = 26) -> tuple[int, int]:
    """(drift events, judged windows) of one long stream drawn from `corpus` alone."""
    rnd = random.Random(seed)
    reports = stream([[(corpus, sized(rnd))] for _ in range(windows)], rnd)
    judged = [r for r in reports if r.status in ("stable", "drift")]
    return sum(r.status == "drift" for r in judged), len(judged)


def _delays(name: str, result: tuple[list[int | None], int, int]) -> dict[str, object]:
    delays, early, judged = result
    hist = {str(d): delays.count(d) for d in sorted(set(delays), key=lambda d: (d is None, d))}
    return {"switch": name, "trials": len(delays), "delay_windows": hist,
            "false_alarms_before": early, "judged_before": judged}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=SCIFACT)
    parser.add_argument("--slice", choices=("held", "tune"), default="held")
    parser.add_argument("--stationary", type=int, default=2000, help="windows")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "streamrag-drift-embeddings")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    tune, held = scifact_slices(args.corpus)
    texts = held if args.slice == "held" else tune
    papers = Corpus(texts, embed(texts, args.cache))
    incidents_texts = incident_reports(100, seed=7)
    incidents = Corpus(incidents_texts, embed(incidents_texts, args.cache))
    other, oncology = oncology_split(papers)
    runs: list[tuple[str, Callable[[], tuple[list[int | None], int, int]]]] = [
        ("to incident reports, at a window start",
         lambda: switch_trials(papers, incidents, args.trials, False)),
        ("to incident reports, mid-window",
         lambda: switch_trials(papers, incidents, args.trials, True)),
        (f"within SciFact to cancer ({len(oncology.texts)} abstracts)",
         lambda: switch_trials(other, oncology, args.trials, False, seed=100)),
        *((f"partial: {share:.0%} of each window becomes incident reports",
           lambda share=share: switch_trials(papers, incidents, args.trials, False, seed=200,
                                             share=share))
          for share in (0.05, 0.1, 0.2, 0.3)),
    ]
    out: dict[str, object] = {"slice": args.slice, "config": DriftConfig().__dict__,
                              "switches": [_delays(name, run()) for name, run in runs]}
    events, judged = stationary(papers, args.stationary)
    out["stationary"] = {"windows_judged": judged, "drift_events": events,
                         "false_alarm_rate": round(events / max(judged, 1), 5)}
    print(json.dumps(out, indent=2))
    path = RESULTS / f"drift-{args.slice}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
