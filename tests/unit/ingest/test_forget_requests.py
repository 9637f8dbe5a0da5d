"""A forget request on docs.raw.v1 becomes the owner's delete at the next version, carrying
the request: whatever source asked, whatever positions came before, never taken for a
repeat; a malformed one is refused with its field named."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.ingest.dedup import apply_change, seen
from services.ingest.normalize import FORGET_SOURCE, RawMessage, parse_raw
from services.ingest.settings import IngestSettings
from shared.contract import forget
from shared.contract.records import Document, Position
from shared.errors import InvalidInput

S = IngestSettings()


def raw(obj: dict[str, object]) -> RawMessage:
    return RawMessage(value=json.dumps(obj).encode(), timestamp=1_700_000_000.0, headers={})


def request(doc_id: str = "d", rid: str = "r1") -> Document:
    parsed = parse_raw(raw({"op": "forget", "id": doc_id, "request_id": rid,
                            "requested_by": "dpo@example.org"}), S, now=5.0)
    assert isinstance(parsed, Document)
    return parsed


def test_a_request_parses_to_a_delete_that_carries_it() -> None:
    doc = request()
    assert (doc.op, doc.text, doc.source) == ("delete", "", FORGET_SOURCE)
    assert forget.is_forget(doc) and doc.metadata == forget.request_marker(
        "r1", "dpo@example.org")
    assert request(rid="r2").content_hash != doc.content_hash  # each request its own


@pytest.mark.parametrize(("obj", "field"), [
    ({"op": "forget", "id": "d", "requested_by": "x"}, "request_id"),
    ({"op": "forget", "id": "d", "request_id": "r"}, "requested_by"),
    ({"op": "forget", "id": "d", "request_id": "r" * 129, "requested_by": "x"}, "request_id"),
    ({"op": "forget", "id": "d", "request_id": "r", "requested_by": "x" * 257},
     "requested_by"),
    ({"op": "forget", "request_id": "r", "requested_by": "x"}, "id"),
    ({"op": "erase", "id": "d"}, "op"),
])
def test_a_malformed_request_is_refused_naming_its_field(obj: dict[str, object],
                                                         field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_raw(raw(obj), S, now=5.0)
    assert err.value.field == field


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 50)),
                min_size=1, max_size=6))
def test_a_forget_is_the_owners_delete_at_the_next_version_after_any_history(
        history: list[tuple[str, int]]) -> None:
    state = None
    version = 0
    for text, lsn in history:
        change = Document(doc_id="d", version=1, text=text, source="crm", event_time=1,
                          ingest_time=1, content_hash=f"h-{text}",
                          position=Position(kind="pg_lsn", key=(lsn,)))
        try:
            applied = apply_change(state, change)
        except InvalidInput:
            continue  # stale: refused as before
        state = applied.state
        version = applied.state["version"]
    forgotten = apply_change(state, request())
    assert forgotten.doc is not None and forgotten.doc.op == "delete"
    assert forgotten.doc.version == version + 1
    assert forgotten.doc.source == ("crm" if state else FORGET_SOURCE)
    assert forgotten.state["deleted"] is True
    again = apply_change(forgotten.state, request(rid="r2"))  # a second request: sent too
    assert again.doc is not None and again.doc.version == version + 2
    back = apply_change(forgotten.state, Document(doc_id="d", version=1, text="new",
                                                  source="crm", event_time=1, ingest_time=1,
                                                  content_hash="h-new"))
    assert back.doc is not None and back.doc.version == forgotten.doc.version + 1
    # The same request replayed after that change: sent again at the version it had (a
    # stale delete downstream, the same forget for redaction), never a forget of "new".
    replay = apply_change(back.state, request(), at=None)
    assert replay.doc is not None and replay.doc.version == forgotten.doc.version
    assert replay.state == back.state
    if state and "position" in state:  # a stale redelivery of an earlier change stays stale
        assert forgotten.state["position"] == state["position"]


def test_the_same_record_replayed_is_sent_again_at_its_version() -> None:
    state = seen(Document(doc_id="d", version=3, text="x", source="crm", event_time=1,
                          ingest_time=1, content_hash="h"))
    first = apply_change(state, request(), at=(0, 9))
    again = apply_change(first.state, request(), at=(0, 9))
    assert first.doc is not None and again.doc is not None
    assert (again.doc.version, again.doc.source) == (4, "crm") == (first.doc.version,
                                                                    first.doc.source)
