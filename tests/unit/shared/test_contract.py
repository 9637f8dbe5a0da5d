"""The topic contract, record codec and dead-letter builder."""

from __future__ import annotations

import base64
import json

import pytest

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
    all_topic_specs,
)
from shared.errors import InvalidInput


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
        assert f"{var}.name" in (root / "services" / service / "app.py").read_text(), var
    assert "streamrag-redaction-audit_chain-changelog" not in {s.name for s in all_topic_specs()}
