"""What ingest writes on is sealed: a parsed change under its document's transit key, a
versioned one under its version's key, its content hash keyed; a forget parsed closes the
transit key, so what was parsed before it is gone once the forget's keys are destroyed
and what came after it still goes through."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from unittest.mock import AsyncMock, patch

import pytest

from services.ingest.agents import Ingest
from services.ingest.normalize import RawMessage, parse_raw
from shared.contract.records import Document
from shared.contract.sealed import open_document
from shared.errors import InvalidInput
from shared.keys.sealing import key_id_for
from shared.keys.store import Destroyed
from tests.support import built
from tests.support.polling import eventually_async


def parsed(stage: Ingest, obj: dict[str, object]) -> Document:
    """One raw record as the parse agent sends it on to docs.parsed.v1."""
    doc = parse_raw(RawMessage(value=json.dumps(obj).encode(), timestamp=1.7e9, headers={}),
                    stage.settings)
    assert isinstance(doc, Document)
    return stage._parsed_sealed(doc)


def unique(name: str) -> str:
    return f"{name}-{time.time_ns()}"  # the unit tests share one key store


def test_a_parsed_change_is_sealed_under_its_documents_transit_key() -> None:
    stage = built.stage("ingest")
    doc_id, text = unique("seal"), "Order 42 shipped to Jane Roe, jane@example.org"
    out = parsed(stage, {"id": doc_id, "text": text, "title": "Jane's order",
                         "source": "t", "metadata": {"owner": "Jane Roe"}})
    wire = out.model_dump_json()
    # Whole phrases: a short string like "42" turns up in base64 ciphertext by chance.
    assert "Jane Roe" not in wire and "jane@example.org" not in wire
    assert "Order 42" not in wire and "Jane's order" not in wire
    assert (out.text, out.title, out.metadata) == ("", "", {})
    transit = stage.keys.by_id(out.key_id)
    assert transit is not None and not isinstance(transit, Destroyed)
    assert transit.version < 0 and transit.doc_id == doc_id
    plain = open_document(out, stage.keys)
    assert (plain.text, plain.title, plain.metadata) == (text, "Jane's order",
                                                         {"owner": "Jane Roe"})
    # The content hash is keyed: a guess of the content cannot be tested against it.
    clear = parse_raw(RawMessage(value=json.dumps({"id": doc_id, "text": text,
                                                   "title": "Jane's order", "source": "t",
                                                   "metadata": {"owner": "Jane Roe"}}).encode(),
                                 timestamp=1.7e9, headers={}), stage.settings)
    assert isinstance(clear, Document)
    assert out.content_hash == stage.keys.content_mac(clear.content_hash)
    assert clear.content_hash not in wire
    assert hashlib.sha256(text.encode()).hexdigest() not in wire


def test_deletes_and_forgets_carry_no_seal_but_a_keyed_hash() -> None:
    stage = built.stage("ingest")
    doc_id = unique("del")
    for obj in ({"id": doc_id, "op": "delete", "source": "t"},
                {"id": doc_id, "op": "forget", "request_id": "r1", "requested_by": "dpo"}):
        out = parsed(stage, obj)
        assert not out.sealed and out.content_hash.startswith("h")


def test_a_forget_closes_the_transit_key_and_destroying_it_spares_what_came_after() -> None:
    stage = built.stage("ingest")
    doc_id = unique("fg")
    before = parsed(stage, {"id": doc_id, "text": "old secret text", "source": "t"})
    request = parsed(stage, {"id": doc_id, "op": "forget", "request_id": "r1",
                             "requested_by": "dpo"})
    after = parsed(stage, {"id": doc_id, "text": "new text after the forget", "source": "t"})
    assert before.key_id != after.key_id
    # Redaction carries the forget out: every key made before the request was parsed.
    stage.keys.destroy(doc_id, 2, "forget r1", made_before=request.ingest_time)
    with pytest.raises(InvalidInput) as err:
        asyncio.run(stage._opened(before))
    assert err.value.reason == "forgotten" and "old secret" not in str(err.value)
    assert asyncio.run(stage._opened(after)).text == "new text after the forget"


def test_a_versioned_change_is_sealed_under_its_versions_key_and_a_forgotten_one_refused(
        ) -> None:
    stage = built.stage("ingest")
    doc_id = unique("ver")
    doc = asyncio.run(stage._opened(parsed(stage, {"id": doc_id, "text": "body", "source": "t"})))
    out = asyncio.run(stage._versioned(doc.model_copy(update={"version": 3})))
    assert out is not None and out.key_id == key_id_for(doc_id, 3) and "body" not in out.sealed
    assert open_document(out, stage.keys).text == "body"
    again = asyncio.run(stage._versioned(doc.model_copy(update={"version": 3})))
    assert again == out  # a replay seals to the same bytes
    stage.keys.destroy(doc_id, 4, "forget r9")
    with pytest.raises(InvalidInput) as err:
        asyncio.run(stage._versioned(doc.model_copy(update={"version": 3})))
    assert err.value.reason == "forgotten"


def test_a_record_sealed_under_a_key_this_store_never_had_is_dead_lettered() -> None:
    stage = built.stage("ingest")
    doc = parsed(stage, {"id": unique("ku"), "text": "body", "source": "t"})
    with pytest.raises(InvalidInput) as err:
        asyncio.run(stage._opened(doc.model_copy(update={"key_id": "t" + "0" * 31})))
    assert err.value.reason == "key_unavailable"
    other = parsed(stage, {"id": unique("other"), "text": "body", "source": "t"})
    with pytest.raises(InvalidInput) as err:  # another document's key: refused, not opened
        asyncio.run(stage._opened(doc.model_copy(update={"key_id": other.key_id,
                                                         "sealed": other.sealed})))
    assert err.value.reason == "key_unavailable"


def through_parse_agent(stage: Ingest, value: bytes) -> bytes:
    """What the stage's parse agent sends on to docs.parsed.v1 for one raw record."""
    stage.app.finalize()
    stage.app.flow_control.resume()
    sent = AsyncMock()

    async def drive() -> None:
        with patch.object(stage.parsed_topic, "send", sent):
            async with stage.parse.test_context() as agent:
                event = await agent.put(value=value, key=None)
                await eventually_async(lambda: event.message.acked, "the record handled")

    asyncio.run(drive())
    return sent.await_args.kwargs["value"]  # type: ignore[no-any-return]


def test_without_sealing_the_parse_agent_writes_in_clear() -> None:
    value = json.dumps({"id": unique("clear"), "text": "plain body", "source": "t"}).encode()
    out = json.loads(through_parse_agent(built.stage("ingest", seal=False), value))
    assert (out["text"], out["sealed"]) == ("plain body", "")


def test_the_parse_agent_seals_what_it_sends() -> None:
    stage = built.stage("ingest")
    value = json.dumps({"id": unique("agent"), "text": "agent body", "source": "t"}).encode()
    wire = through_parse_agent(stage, value)
    assert b"agent body" not in wire
    assert open_document(Document.model_validate_json(wire), stage.keys).text == "agent body"
