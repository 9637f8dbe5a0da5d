"""Every service's /metrics on the real mesh, one process per service: records in and out
per stage grow by the records sent, and a malformed record shows as a dead letter by reason."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.cli.mesh import Endpoints, free_port, isolated
from shared.contract.topics import SERVICES
from tests.support.mesh import MESH_ENV, produce, uid
from tests.support.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
DOCS = 3
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {name: free_port() for name in SERVICES}


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory, ports: dict[str, int]
            ) -> Iterator[Endpoints]:
    """A mesh of its own (its broker too: the session mesh's groups are not joined), every
    service on its own metrics port."""
    env = {**MESH_ENV, **{f"STREAMRAG_{name.upper()}_METRICS_PORT": str(port)
                          for name, port in ports.items()}}
    with isolated(tmp_path_factory.mktemp("metered"), ROOT / ".tools/node_modules/.bin/anvil",
                  env=env, processes=True) as endpoints:
        yield endpoints


def scrape(port: int) -> Samples:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def flow(port: int, kind: str, stage: str, topic: str) -> float:
    return value(scrape(port), f"streamrag_stage_records_{kind}_total",
                 service=stage.split(".")[0], stage=stage, topic=topic)


def test_each_service_counts_its_records_in_out_and_dead_letters(
        metered: Endpoints, ports: dict[str, int]) -> None:
    # (service, stage, in or out, topic) -> growth expected for DOCS documents and one
    # malformed record (None: at least one; timers and batching decide how many).
    expected: dict[tuple[str, str, str, str], int | None] = {
        ("ingest", "ingest", "in", "docs.raw.v1"): DOCS + 1,
        ("ingest", "ingest", "out", "docs.parsed.v1"): DOCS,
        ("ingest", "ingest", "out", "deadletter.raw.v1"): 1,
        ("ingest", "ingest.dedup", "in", "docs.parsed.v1"): DOCS,
        ("ingest", "ingest.dedup", "out", "docs.normalized.v1"): DOCS,
        ("redaction", "redaction", "in", "docs.normalized.v1"): DOCS,
        ("redaction", "redaction", "out", "docs.redacted.v1"): DOCS,
        ("redaction", "redaction", "out", "audit.batches.v1"): None,
        ("chunking", "chunking", "in", "docs.redacted.v1"): DOCS,
        ("chunking", "chunking", "out", "chunks.v1"): DOCS,
        ("embedding", "embedding", "in", "chunks.v1"): DOCS,
        ("embedding", "embedding", "out", "chunks.embedded.v1"): DOCS,
        ("retrieval", "retrieval", "in", "chunks.embedded.v1"): DOCS,
        ("ledger", "ledger", "in", "audit.batches.v1"): None,
        ("inference", "inference", "in", "stats.counts.v1"): None,
    }
    def flows() -> dict[tuple[str, str, str, str], float] | None:
        try:
            return {key: flow(ports[key[0]], key[2], key[1], key[3]) for key in expected}
        except urllib.error.URLError:  # a worker still starting its /metrics server
            return None

    # The mesh is ready when inference and every shard answer; a worker's /metrics server
    # may come up a moment after its stage joined.
    before = eventually(flows, "every service's /metrics to answer", timeout_s=60)
    dead_before = value(scrape(ports["ingest"]), "streamrag_records_dead_lettered_total",
                        stage="ingest", reason="malformed_json")
    source = uid("metrics")
    produce(metered, [json.dumps({"id": uid("doc"), "source": source,
                                  "text": f"Metered document number {n} about tide clocks."}
                                 ).encode() for n in range(DOCS)] + [b"{not json"])

    def grown() -> dict[tuple[str, str, str, str], float] | None:
        seen = flows()
        if seen is None:
            return None
        now = {key: seen[key] - before[key] for key in expected}
        done = all(now[k] >= (n or 1) for k, n in expected.items())
        return now if done else None

    growth = eventually(grown, "every stage's counters to grow", timeout_s=60)
    assert {k: growth[k] for k, n in expected.items() if n is not None} == \
        {k: n for k, n in expected.items() if n is not None}
    dead = value(scrape(ports["ingest"]), "streamrag_records_dead_lettered_total",
                 stage="ingest", reason="malformed_json")
    assert dead - dead_before == 1
    # Inference's port shows its own metrics beside the stage counters.
    assert any(name.startswith("streamrag_inference_") for name, _ in scrape(ports["inference"]))


def test_one_process_shows_every_stage_on_one_port(onebox_mesh: Endpoints,
                                                   onebox_metrics_url: str) -> None:
    """One-process mode: inference's port (the only one set) shows every hosted stage."""
    port = int(onebox_metrics_url.rsplit(":", 1)[1].split("/")[0])
    stages = {("ingest", "docs.raw.v1"), ("chunking", "docs.redacted.v1"),
              ("embedding", "chunks.v1"), ("retrieval", "chunks.embedded.v1")}
    before = {(s, t): flow(port, "in", s, t) for s, t in stages}
    produce(onebox_mesh, [json.dumps({"id": uid("doc"), "source": uid("metrics"),
                                      "text": "One port for the whole worker."}).encode()])
    eventually(lambda: all(flow(port, "in", s, t) - before[(s, t)] == 1 for s, t in stages),
               "every stage's counter on the one port", timeout_s=60)
