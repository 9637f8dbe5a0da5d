"""Observability on the real mesh, one process per service: every service's /metrics
(records in and out per stage grow by the records sent, a malformed record shows as a dead
letter by reason), and OpenTelemetry traces exported over OTLP to a receiver in the test
(a document produced with a `traceparent` has spans of every stage and of the query under
that trace id)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scripts.benchlib.otlp import Receiver, Span
from services.cli.mesh import Endpoints, free_port, isolated
from shared.contract.topics import SEARCH_REQUESTS, SERVICES
from shared.rpc.streamrag.v1 import inference_pb2, inference_pb2_grpc
from tests.support.mesh import MESH_ENV, chunks_of, produce, uid
from tests.support.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
DOCS = 3
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    return {name: free_port() for name in SERVICES}


@pytest.fixture(scope="module")
def collector() -> Iterator[Receiver]:
    with Receiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory, ports: dict[str, int],
            collector: Receiver) -> Iterator[Endpoints]:
    """A mesh of its own (its broker too: the session mesh's groups are not joined), every
    service on its own metrics port and exporting every span to `collector`."""
    env = {**MESH_ENV, **{f"STREAMRAG_{name.upper()}_METRICS_PORT": str(port)
                          for name, port in ports.items()},
           "STREAMRAG_TRACING_EXPORTER": "otlp",
           "STREAMRAG_TRACING_OTLP_ENDPOINT": collector.endpoint,
           "STREAMRAG_TRACING_EXPORT_INTERVAL_MS": "200"}
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


def freshness(port: int) -> tuple[float, float]:
    """Retrieval's freshness histogram: (observations, of them within a minute)."""
    samples = scrape(port)
    return (value(samples, "streamrag_retrieval_freshness_seconds_count"),
            value(samples, "streamrag_retrieval_freshness_seconds_bucket", le="60.0"))


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
    fresh_before = freshness(ports["retrieval"])
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
    # Freshness: one observation per version made searchable, each under a minute here.
    fresh = eventually(lambda: freshness(ports["retrieval"])[0] - fresh_before[0] == DOCS,
                       "freshness observations", timeout_s=30)
    assert fresh and freshness(ports["retrieval"])[1] - fresh_before[1] == DOCS
    # The ledger times each anchor from the batch's close.
    eventually(lambda: value(scrape(ports["ledger"]),
                             "streamrag_ledger_anchor_latency_seconds_count") >= 1,
               "an anchor's latency", timeout_s=60)
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


PIPELINE = ("ingest", "ingest.dedup", "redaction", "chunking", "embedding", "retrieval",
            "ledger")


def test_a_documents_trace_holds_every_stage_and_the_query(
        metered: Endpoints, collector: Receiver) -> None:
    trace_id, root = os.urandom(16).hex(), os.urandom(8).hex()
    doc_id, word = uid("doc"), uid("quokka").replace("-", "")
    produce(metered, [json.dumps({"id": doc_id, "source": uid("traced"),
                                  "text": f"The {word} tide clock is wound at dawn."}).encode()],
            headers=[("traceparent", f"00-{trace_id}-{root}-01".encode())])
    eventually(lambda: chunks_of(metered, f"{word} tide clock", doc_id),
               "the traced document to be searchable", timeout_s=90)
    # The query joins the same trace, as a caller's instrumented client would send it.
    query_parent = os.urandom(8).hex()
    with grpc.insecure_channel(metered.grpc_target) as channel:
        answer = inference_pb2_grpc.InferenceStub(channel).Query(
            inference_pb2.QueryRequest(question=f"{word} tide clock", top_k=5), timeout=15,
            metadata=[("traceparent", f"00-{trace_id}-{query_parent}-01")])
    assert any(c.doc_id == doc_id for c in answer.citations)

    def complete() -> list[Span] | None:
        got = collector.spans(trace_id)
        stages = {s.attributes.get("streamrag.stage") for s in got}
        shards = {s.name for s in got if s.name.startswith("search shard")}
        served = [s for s in got if s.name == "/streamrag.v1.Inference/Query"]
        # The parents asserted below too: each process exports on its own timer, so a
        # child's span (retrieval's, the ledger's) may arrive before its parent's.
        parents = {"embedding emit", "redaction batch"} <= {s.name for s in got}
        done = (set(PIPELINE) | {"retrieval.search"}) <= stages and served and parents and \
            len(shards) == SEARCH_REQUESTS.partitions
        return got if done else None

    spans = eventually(complete, "spans of every stage and of the query", timeout_s=60)
    by_id = {s.span_id: s for s in spans}
    by_stage = {s.attributes.get("streamrag.stage"): s for s in spans
                if s.name.endswith(" process")}
    # The producer's span is the parent of the first stage's; each later stage descends
    # from the one before it, through the record's headers.
    assert by_stage["ingest"].parent_id == root
    assert by_stage["ingest"].service == "streamrag-ingest"
    for stage in ("ingest", "ingest.dedup", "redaction", "chunking", "embedding", "retrieval"):
        assert by_stage[stage].attributes["streamrag.doc_id"] == doc_id, stage
        assert by_stage[stage].attributes["streamrag.outcome"] == "accepted", stage
        assert by_stage[stage].attributes["messaging.destination.name"], stage
    for stage, before in (("ingest.dedup", "ingest"), ("redaction", "ingest.dedup"),
                          ("chunking", "redaction"), ("embedding", "chunking")):
        assert by_id[by_stage[stage].parent_id] == by_stage[before], stage
    # Embedding sends each output in a span of its own; retrieval descends from it.
    emitted = by_id[by_stage["retrieval"].parent_id]
    assert emitted.name == "embedding emit" and emitted.parent_id == by_stage["chunking"].span_id
    # Redaction's micro-batch links the record it took; the ledger anchors under it.
    batch = next(s for s in spans if s.name == "redaction batch")
    assert (trace_id, by_stage["redaction"].span_id) not in batch.links
    assert any(link[0] == trace_id for link in batch.links)
    assert by_id[by_stage["ledger"].parent_id].name == "redaction batch"
    # The query: the server span is the caller's child; one span per shard under it, each
    # the parent of that shard's search.
    served = next(s for s in spans if s.name == "/streamrag.v1.Inference/Query")
    assert served.parent_id == query_parent and served.service == "streamrag-inference"
    shards = [s for s in spans if s.name.startswith("search shard")]
    assert {by_id[s.parent_id].span_id for s in shards if s.parent_id in by_id} == \
        {served.span_id}
    searches = [s for s in spans if s.attributes.get("streamrag.stage") == "retrieval.search"]
    assert {s.parent_id for s in searches} <= {s.span_id for s in shards}
    # No span carries the document's text.
    assert word not in json.dumps([s.attributes for s in spans])


def test_a_dead_letter_ends_its_trace_with_the_reason(
        metered: Endpoints, collector: Receiver) -> None:
    trace_id = os.urandom(16).hex()
    produce(metered, [b"{not json"],
            headers=[("traceparent", f"00-{trace_id}-{os.urandom(8).hex()}-01".encode())])

    def ingest_span() -> Span | None:
        return next((s for s in collector.spans(trace_id)
                     if s.attributes.get("streamrag.stage") == "ingest"), None)

    span = eventually(ingest_span, "the malformed record's span", timeout_s=30)
    assert span.attributes["streamrag.outcome"] == "dead_lettered"
    assert span.attributes["streamrag.dead_letter.reason"] == "malformed_json"
    assert span.status_code == 2  # STATUS_CODE_ERROR
