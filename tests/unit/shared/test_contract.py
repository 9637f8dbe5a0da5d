"""The topic contract, record codec and dead-letter builder."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.contract.codec import decode, encode
from shared.contract.dlq import build_dead_letter
from shared.contract.records import (
    Document,
    SearchRequest,
    SearchSpec,
    decode_vector,
    encode_vector,
)
from shared.contract.topics import (
    CHUNKS_EMBEDDED,
    SEARCH_REQUESTS,
    SERVICE_INPUTS,
    SERVICES,
    TABLES,
    TOPICS,
    all_topic_specs,
    check_copartitioned,
)
from shared.errors import ConfigError, InvalidInput
from shared.settings import PartitionSettings


def test_names_are_versioned_and_unique() -> None:
    names = [s.name for s in all_topic_specs()]
    assert len(names) == len(set(names))
    assert all(n.endswith((".v1", "-changelog")) for n in names)


def test_search_requests_are_copartitioned_with_the_shards() -> None:
    # Faust's assignor gives one worker the same partition numbers of equal-sized topics:
    # that is what routes request partition p to the owner of shard p.
    assert SEARCH_REQUESTS.partitions == CHUNKS_EMBEDDED.partitions


def test_every_table_matches_its_source_topic_partitions() -> None:
    for table in TABLES:
        service = next(k for k, v in SERVICES.items() if v == table.app_id)
        assert {t.partitions for t in SERVICE_INPUTS[service]} >= {table.partitions}


def test_compacted_topics_have_no_retention_limit() -> None:
    assert CHUNKS_EMBEDDED.broker_config() == {"cleanup.policy": "compact",
                                             "max.message.bytes": str(16 * 1024 * 1024)}
    assert SEARCH_REQUESTS.broker_config()["retention.ms"] == str(3_600_000)


def _doc() -> Document:
    return Document(doc_id="a", version=1, text="t", source="s", event_time=1, ingest_time=2)


def test_codec_round_trip() -> None:
    assert decode(Document, encode(_doc())) == _doc()


@pytest.mark.parametrize(("raw", "reason", "field"), [
    (b"{", "malformed_json", None),
    (b"\xff", "not_utf8", None),
    (b"[]", "not_an_object", None),
    (b'{"schema_version": 7}', "unknown_schema_version", "schema_version"),
    (b'{"doc_id": "a", "version": 0, "source": "s", "event_time": 1, "ingest_time": 1}',
     "invalid_field", "version"),
    (b'{"doc_id": "a", "version": 1, "source": "s", "event_time": 1, "ingest_time": 1, '
     b'"surprise": 1}', "invalid_field", "surprise"),
])
def test_codec_refuses_with_reason(raw: bytes, reason: str, field: str | None) -> None:
    with pytest.raises(InvalidInput) as err:
        decode(Document, raw)
    assert (err.value.reason, err.value.field) == (reason, field)


def test_vectors_round_trip_as_float32() -> None:
    import numpy as np
    v = np.array([0.5, -1.25, 3.0], dtype="float32")
    assert decode_vector(encode_vector(v)).tolist() == [0.5, -1.25, 3.0]
    spec = SearchSpec(query_id="q", vector=encode_vector(v), top_k=1)
    req = SearchRequest(request_id="r", partition=0, model_id="m", dim=3, deadline=0,
                        queries=(spec,))
    wire = json.loads(encode(req))
    assert wire["queries"][0]["vector"] == base64.b64encode(v.tobytes()).decode()
    assert wire["schema_version"] == 2


def test_search_request_refuses_the_old_single_query_form() -> None:
    old = {"schema_version": 1, "request_id": "r", "partition": 0, "vector": "AAAA",
           "model_id": "m", "dim": 1, "top_k": 1, "deadline": 0}
    with pytest.raises(InvalidInput) as err:
        decode(SearchRequest, json.dumps(old).encode())
    assert (err.value.reason, err.value.field) == ("unknown_schema_version", "schema_version")
    empty = {"schema_version": 2, "request_id": "r", "partition": 0, "model_id": "m",
             "dim": 1, "deadline": 0, "queries": []}
    with pytest.raises(InvalidInput) as err:
        decode(SearchRequest, json.dumps(empty).encode())
    assert (err.value.reason, err.value.field) == ("invalid_field", "queries")


def test_dead_letter_keeps_payload_only_before_redaction() -> None:
    exc = InvalidInput("wrong_type", "text", "expected string")
    args = dict(topic="t", partition=1, offset=9, key=b"k", payload=b"secret@example.com")
    before = build_dead_letter("ingest", exc, keep_payload=True, **args)
    after = build_dead_letter("chunking", exc, keep_payload=False, **args)
    assert base64.b64decode(before.payload_b64 or "") == b"secret@example.com"
    assert after.payload_b64 is None and "secret" not in encode(after).decode()
    assert after.payload_sha256 == before.payload_sha256 and after.payload_size == 18
    assert (after.reason, after.field, after.offset, after.key) == ("wrong_type", "text", 9, "k")


def test_decode_or_dead_letter_returns_the_record_or_sends_the_reason() -> None:
    import asyncio
    from types import SimpleNamespace
    from unittest.mock import AsyncMock

    from shared.contract.dlq import decode_or_dead_letter

    def event(value: bytes) -> SimpleNamespace:
        return SimpleNamespace(message=SimpleNamespace(
            topic="t", partition=2, offset=7, key=b"k", value=value))

    dlq = SimpleNamespace(send=AsyncMock())
    good = asyncio.run(decode_or_dead_letter(Document, event(encode(_doc())), dlq, "stage"))
    assert good == _doc() and dlq.send.await_count == 0
    bad = asyncio.run(decode_or_dead_letter(Document, event(b"{oops"), dlq, "stage"))
    assert bad is None and dlq.send.await_count == 1
    letter = json.loads(dlq.send.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["offset"]) == ("stage", "malformed_json", 7)
    assert letter["payload_b64"] is None


def test_every_table_in_the_contract_is_a_table_of_its_service() -> None:
    """A changelog topic is created for each: a table no service declares (redaction's old
    audit_chain) would be a topic nobody uses."""
    from pathlib import Path

    from shared.contract import topics
    root = Path(__file__).resolve().parents[3]
    for table in TABLES:
        var = next(k for k, v in vars(topics).items() if v is table)
        service = next(k for k, v in SERVICES.items() if v == table.app_id)
        declared = (root / "services" / service / "app.py").read_text()
        assert re.search(rf"\b{var}(\.name|\))", declared), var
    assert "streamrag-redaction-audit_chain-changelog" not in {s.name for s in all_topic_specs()}


# Partition counts per topic group (STREAMRAG_KAFKA_PARTITIONS_*): every topic names its
# group, every changelog follows its table's source topic, single topics stay at one.
counts = st.integers(min_value=1, max_value=64)


@given(documents=counts, audit=counts, telemetry=counts)
def test_every_topic_takes_its_groups_count_and_changelogs_follow_their_source(
        documents: int, audit: int, telemetry: int) -> None:
    layout = PartitionSettings(partitions_documents=documents, partitions_audit=audit,
                               partitions_telemetry=telemetry)
    specs = {s.name: s for s in all_topic_specs(layout)}
    want = {"documents": documents, "audit": audit, "telemetry": telemetry, "single": 1}
    assert {name: s.partitions for name, s in specs.items()} == {
        name: want[s.group] for name, s in specs.items()}
    for table in TABLES:
        assert specs[table.changelog].partitions == specs[table.source.name].partitions
    assert specs[SEARCH_REQUESTS.name].partitions == specs[CHUNKS_EMBEDDED.name].partitions
    check_copartitioned(tuple(specs.values()))  # never raises for a layout of the settings


def test_the_groups_hold_the_topics_they_say() -> None:
    groups = {s.name: s.group for s in TOPICS}
    assert {n for n, g in groups.items() if g == "documents"} == {
        "docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "docs.redacted.v1",
        "pii.subjects.v1", "chunks.v1", "chunks.embedded.v1", "search.requests.v1"}
    assert {n for n, g in groups.items() if g == "audit"} == {"audit.batches.v1",
                                                              "audit.queries.v1"}
    # One reader must see every record of these (the SLO guard, the config log, the DLQ).
    assert {n for n, g in groups.items() if g == "single"} >= {
        "ledger.anchors.v1", "deadletter.v1", "config.query.v1", "guard.samples.v1"}
    assert all(s.partitions == 1 for s in all_topic_specs(PartitionSettings(
        partitions_documents=9, partitions_audit=9, partitions_telemetry=9))
        if s.group == "single")


def test_search_requests_apart_from_the_shards_are_refused_naming_both() -> None:
    split = tuple(replace(s, count=6) if s.name == SEARCH_REQUESTS.name else s
                  for s in all_topic_specs())
    with pytest.raises(ConfigError) as raised:
        check_copartitioned(split)
    assert str(raised.value).startswith(
        "search.requests.v1 has 6 partitions and chunks.embedded.v1 4: they must be equal")
    assert "STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS" in str(raised.value)


def test_the_environment_sizes_every_reader_of_the_contract_in_a_process() -> None:
    # The contract is read once per process: a fresh interpreter with the variables set
    # sees them in the topic specs, the admin's specs, inference's scatter fan-out (its
    # requests topic) and `streamrag trace`'s partition_of.
    probe = (
        "from shared.contract.topics import SEARCH_REQUESTS, DOCS_RAW, AUDIT_BATCHES, "
        "FEEDBACK, DEADLETTER, ANCHORED\n"
        "from shared.kafka.admin import contract_specs\n"
        "from services.cli.trace import partition_of\n"
        "specs = {s.name: s.partitions for s in contract_specs()}\n"
        "print(SEARCH_REQUESTS.partitions, DOCS_RAW.partitions, AUDIT_BATCHES.partitions,"
        " FEEDBACK.partitions, DEADLETTER.partitions, ANCHORED.partitions,"
        " specs['streamrag-ledger-anchored_batches-changelog'],"
        " 1 + max(partition_of(f'd{i}') for i in range(500)))\n")
    env = {**os.environ, "STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS": "7",
           "STREAMRAG_KAFKA_PARTITIONS_AUDIT": "3", "STREAMRAG_KAFKA_PARTITIONS_TELEMETRY": "5"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    assert out.stdout.split() == ["7", "7", "3", "5", "1", "3", "3", "7"]


def test_a_partition_count_out_of_range_fails_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_KAFKA_PARTITIONS_DOCUMENTS", "0")
    with pytest.raises(ValidationError, match="partitions_documents"):
        PartitionSettings()
