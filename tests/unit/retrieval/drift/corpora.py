"""Real text for the drift tests: SciFact abstracts and generated incident reports, embedded
with the project's encoder once and cached on disk (pytest's cache folder)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np

SCIFACT = Path(__file__).resolve().parents[5] / "shared" / "data" / "beir" / "scifact-train"
MAX_TOKENS = 64  # a document's opening says its topic; short keeps the first run short
POOL = 300  # documents per slice


class Corpus:
    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        assert len(texts) == len(vectors)
        self.texts, self.vectors = texts, vectors

    def where(self, keep: list[bool]) -> Corpus:
        return Corpus([t for t, k in zip(self.texts, keep, strict=True) if k],
                      self.vectors[np.asarray(keep)])


def scifact_slices() -> tuple[list[str], list[str]]:
    """Two disjoint slices of SciFact in a fixed shuffled order: the first to tune on, the
    second held out (its figures are the ones docs/design/drift.md reports)."""
    with (SCIFACT / "corpus.jsonl").open() as f:
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
