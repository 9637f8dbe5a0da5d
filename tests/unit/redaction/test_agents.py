"""The redaction agent under Faust's test context, with a stand-in for Presidio."""

from __future__ import annotations

import asyncio
import json
from unittest.mock import AsyncMock, patch

from services.redaction import agents
from services.redaction.app import app, audit_topic, dlq, redacted_topic
from shared.batching import current_event
from shared.records import Document, RedactedDocument


class FakeRedactor:
    """Fails on documents whose text says so; otherwise upper-cases the text."""

    fingerprint = "f" * 64

    def redact_isolated(self, docs: list[Document]) -> list[RedactedDocument | Exception]:
        return [ValueError(f"analyzer broke on {d.text}") if "boom" in d.text else
                RedactedDocument(**d.model_dump(exclude={"text"}), text=d.text.upper())
                for d in docs]


def doc(i: int, text: str) -> bytes:
    return Document(doc_id=f"d{i}", version=1, text=text, source="t", event_time=0,
                    ingest_time=0).model_dump_json().encode()


async def _drive(values: list[bytes]) -> tuple[AsyncMock, AsyncMock, AsyncMock]:
    app.finalize()
    app.flow_control.resume()
    red, audit, dead = AsyncMock(), AsyncMock(), AsyncMock()
    with patch.object(redacted_topic, "send", red), patch.object(audit_topic, "send", audit), \
            patch.object(dlq, "send", dead), patch.object(agents, "redactor", FakeRedactor()):
        async with agents.redact.test_context() as agent:
            for value in values:
                await agent.put(value=value, key=None)
            await asyncio.sleep(0.5)  # past batch_within_s: the micro-batch closes
    return red, audit, dead


def test_a_failing_document_is_dead_lettered_alone_and_the_batch_is_audited() -> None:
    red, audit, dead = asyncio.run(_drive([doc(1, "alpha"), doc(2, "boom secret text"),
                                           b"{not json", doc(3, "gamma")]))
    sent = [json.loads(c.kwargs["value"]) for c in red.await_args_list]
    assert [(d["doc_id"], d["text"]) for d in sent] == [("d1", "ALPHA"), ("d3", "GAMMA")]
    letters = [json.loads(c.kwargs["value"]) for c in dead.await_args_list]
    assert sorted(x["reason"] for x in letters) == ["malformed_json", "redaction_failed"]
    failed = next(x for x in letters if x["reason"] == "redaction_failed")
    assert failed["detail"] == "ValueError" and failed["payload_b64"] is None
    assert "boom" not in json.dumps(letters)
    (call,) = audit.await_args_list
    batch = json.loads(call.kwargs["value"])
    assert [leaf["doc_id"] for leaf in batch["leaves"]] == ["d1", "d3"]
    assert all(d["batch_id"] == batch["batch_id"] for d in sent)
    assert batch["batch_id"].startswith("docs.normalized.v1/") and batch["doc_count"] == 2


class Stream:
    def __init__(self) -> None:
        self.current_event: object = "next message"

    def _set_current_event(self, event: object) -> None:
        self.current_event = event


def test_table_writes_borrow_the_current_event_and_give_it_back() -> None:
    """take_events reads stream.current_event for the next message: it must not stay old."""
    stream = Stream()
    with current_event(stream, "batch event"):
        assert stream.current_event == "batch event"
    assert stream.current_event == "next message"
