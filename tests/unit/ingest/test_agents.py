"""The ingest agents under Faust's test context: good records forward, bad ones dead-letter."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from unittest.mock import AsyncMock, patch

import pytest

from services.ingest import agents
from services.ingest.agents import Ingest
from shared.contract.codec import encode
from shared.contract.records import Document, Position
from shared.contract.sealed import open_document
from shared.keys.store import VersionKeys
from shared.worker.boundary import counts
from tests.support import built
from tests.support.polling import eventually_async

# One stage for the tests below that share it; a test that needs its own builds one.
stage: Ingest = built.stage("ingest")
app, normalized_topic, parsed_topic = stage.app, stage.normalized_topic, stage.parsed_topic
source_clocks, stats_topic = stage.source_clocks, stage.stats_topic
dlq, dlq_raw = stage.dedup_boundary.dlq_topic, stage.parse_boundary.dlq_topic


def run(coro):  # noqa: ANN001, ANN201
    return asyncio.run(coro)


async def _settled(events: list) -> None:
    """Wait until the agent has finished with `events` (a record's handling awaits the key
    store off the loop, so `put` returns once the agent has it, before it is done)."""
    await eventually_async(lambda: all(e.message.acked for e in events),
                           f"{len(events)} records handled")


def opened(value: bytes) -> dict:
    """A record as sent, its text opened with the test key store when sealed."""
    data = json.loads(value)
    if data.get("sealed"):
        data = open_document(Document.model_validate(data), keys()).model_dump(mode="json")
    return data


@functools.cache
def keys() -> VersionKeys:
    return VersionKeys.from_settings()


async def _drive(values: list[bytes]) -> tuple[AsyncMock, AsyncMock]:
    app.finalize()
    app.flow_control.resume()
    forward, dead = AsyncMock(), AsyncMock()
    with patch.object(parsed_topic, "send", forward), patch.object(dlq_raw, "send", dead), \
            patch.object(stats_topic, "send", AsyncMock()):
        async with stage.parse.test_context() as agent:
            await _settled([await agent.put(value=value, key=None) for value in values])
    return forward, dead


def test_parse_agent_forwards_good_and_dead_letters_bad_without_stopping() -> None:
    good = json.dumps({"id": "doc-1", "text": "Hello", "source": "t"}).encode()
    forward, dead = run(_drive([b"{broken", good]))
    assert forward.await_count == 1
    sent = forward.await_args.kwargs
    assert sent["key"] == b"doc-1" and opened(sent["value"])["text"] == "Hello"
    assert b"Hello" not in sent["value"]  # sealed under the document's transit key
    assert dead.await_count == 1
    letter = json.loads(dead.await_args.kwargs["value"])
    assert letter["reason"] == "malformed_json" and letter["stage"] == "ingest"
    assert letter["payload_b64"] is not None  # raw input keeps its payload for replay


def test_an_unexpected_error_dead_letters_the_record_by_type_and_the_next_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    secret = "patient Jane Roe, SSN 078-05-1120"
    real = agents.parse_raw

    def flaky(msg, settings):  # noqa: ANN001, ANN202
        if b"boom" in msg.value:
            raise ValueError(f"cannot handle {secret}")
        return real(msg, settings)

    bad = json.dumps({"id": "boom", "text": secret, "source": "t"}).encode()
    good = json.dumps({"id": "doc-2", "text": "Hello", "source": "t"}).encode()
    before = counts().get("ingest", {})
    with patch.object(agents, "parse_raw", flaky), caplog.at_level(logging.DEBUG):
        forward, dead = run(_drive([bad, good]))
    letter = json.loads(dead.await_args.kwargs["value"])
    assert (letter["stage"], letter["reason"], letter["detail"]) == (
        "ingest", "internal_error", "ValueError")
    assert letter["field"] is None
    assert forward.await_count == 1 and forward.await_args.kwargs["key"] == b"doc-2"
    assert secret not in caplog.text and "Traceback" not in caplog.text
    assert "ValueError" in caplog.text  # the type is logged, the message never
    assert secret not in letter["detail"]
    after = counts()["ingest"]
    assert after["internal_error.ValueError"] - before.get("internal_error.ValueError", 0) == 1
    assert after["processed"] - before.get("processed", 0) == 2
    assert (after["dead_lettered.internal_error"]
            - before.get("dead_lettered.internal_error", 0)) == 1


def _parsed(doc_id: str, text: str, lsn: int) -> bytes:
    return encode(Document(doc_id=doc_id, version=1, text=text, source="cdc:shop.articles",
                           source_kind="cdc", event_time=1.0, ingest_time=1.0,
                           content_hash=f"h-{text}", position=Position(kind="pg_lsn", key=(lsn,))))


def test_dedup_agent_dead_letters_a_stale_change_and_a_conflict_and_sends_the_newest() -> None:
    app.finalize()
    app.flow_control.resume()
    forward, dead, stats = AsyncMock(), AsyncMock(), AsyncMock()
    stage.stats.drain()
    values = [_parsed("ord-1", "new", 20), _parsed("ord-1", "old", 10),
              _parsed("ord-1", "new", 20), _parsed("ord-1", "other", 20)]

    async def drive() -> None:
        with patch.object(normalized_topic, "send", forward), patch.object(dlq, "send", dead), \
                patch.object(stats_topic, "send", stats):
            async with stage.deduplicate.test_context() as agent:
                await _settled([await agent.put(value=value, key=b"ord-1")
                                for value in values])

    run(drive())
    assert forward.await_count == 1
    sent = opened(forward.await_args.kwargs["value"])
    assert (sent["text"], sent["version"], sent["position"]) == (
        "new", 1, {"kind": "pg_lsn", "key": [20]})
    letters = [json.loads(c.kwargs["value"]) for c in dead.await_args_list]
    assert [(d["stage"], d["reason"]) for d in letters] == [
        ("ingest.dedup", "stale_version"), ("ingest.dedup", "version_conflict")]
    with patch.object(stats_topic, "send", stats):
        run(stage.send_stats())
    counted = [json.loads(c.kwargs["value"]) for c in stats.await_args_list]
    assert [(c["source"], c["domain"], c["counts"]) for c in counted] == [
        ("cdc:shop.articles", "default", {"received": 4, "new": 1,
                                          "dead_lettered.stale_version": 1,
                                          "dead_lettered.version_conflict": 1})]
    run(stage.send_stats())
    assert stats.await_count == 1  # drained: nothing twice
    clocks = {k: v for k, v in source_clocks.items() if k.startswith("cdc:shop.articles@")}
    assert [c["seen"] for c in clocks.values()] == [4]


def test_parse_failure_is_counted_as_received_and_dead_lettered() -> None:
    app.finalize()
    app.flow_control.resume()
    stats = AsyncMock()
    stage.stats.drain()

    async def drive() -> None:
        with patch.object(parsed_topic, "send", AsyncMock()), \
                patch.object(dlq_raw, "send", AsyncMock()), \
                patch.object(stats_topic, "send", stats):
            async with stage.parse.test_context() as agent:
                await _settled([await agent.put(value=b"{broken", key=None)])

    run(drive())
    with patch.object(stats_topic, "send", stats):
        run(stage.send_stats())
    counted = json.loads(stats.await_args.kwargs["value"])
    assert (counted["source"], counted["counts"]) == (
        "unknown", {"received": 1, "dead_lettered.malformed_json": 1})


def _dedup(ingest: Ingest, values: list[bytes]) -> AsyncMock:
    """Run `values` through `ingest`'s dedup agent (offsets 0, 1, ... of partition 0); what
    it sent on to docs.normalized.v1."""
    ingest.app.finalize()
    ingest.app.flow_control.resume()
    forward = AsyncMock()

    async def drive() -> None:
        with patch.object(ingest.normalized_topic, "send", forward), \
                patch.object(ingest.dedup_boundary.dlq_topic, "send", AsyncMock()), \
                patch.object(ingest.stats_topic, "send", AsyncMock()):
            async with ingest.deduplicate.test_context() as agent:
                await _settled([await agent.put(value=value, key=b"crash-1", partition=0)
                                for value in values])
    run(drive())
    return forward


def test_a_change_replayed_after_a_crash_that_its_table_record_survived_is_sent_again() -> None:
    """kill -9 after the doc_versions changelog record reached the broker but before the
    docs.normalized.v1 record did: the next worker restores the table, reads the same
    record again (its offset was never committed) and must send it on, not drop it as a
    repeat, or the document is lost (seen in a backup of a running mesh)."""
    first = built.stage("ingest")
    sent = _dedup(first, [_parsed("crash-1", "body", 30)])
    assert opened(sent.await_args.kwargs["value"])["version"] == 1
    survived = dict(first.doc_versions.items())
    assert survived["crash-1"]["at"] == [0, 0]
    after_crash = built.stage("ingest")  # a new worker, its table restored from the changelog
    for doc_id, state in survived.items():  # as a changelog recovery fills the store
        after_crash.doc_versions.data[doc_id] = state
    again = _dedup(after_crash, [_parsed("crash-1", "body", 30)])  # offset 0 once more
    assert again.await_count == 1
    resent = opened(again.await_args.kwargs["value"])
    assert again.await_args.kwargs["value"] == sent.await_args.kwargs["value"]  # sealed alike
    assert (resent["doc_id"], resent["version"], resent["text"]) == ("crash-1", 1, "body")


def test_the_same_content_at_another_offset_is_still_a_repeat() -> None:
    ingest = built.stage("ingest")
    sent = _dedup(ingest, [_parsed("crash-1", "body", 30), _parsed("crash-1", "body", 30)])
    assert sent.await_count == 1  # a client sending the same change twice: dropped


def test_two_builds_are_two_stages_and_the_module_keeps_no_state() -> None:
    one, two = built.stage("ingest"), built.stage("ingest")
    assert one.stats is not two.stats and one.app is not two.app
    assert one.doc_versions is not two.doc_versions
    assert not hasattr(agents, "stats") and not hasattr(agents, "doc_versions")
    assert not hasattr(agents, "app") and not hasattr(agents, "settings")
