"""Access labels on the real mesh: from each input shape to every embedded chunk set.

A plain document, a Debezium row (its `acl` column) and an API ticket (labels at the
mapping's JSON path `ticket.acl`) each reach chunks.embedded.v1 with exactly their labels;
a new version whose only change is its labels becomes a new embedded version with the new
labels (so a revoked group loses access as fast as content changes); a label hiding a phone
number is dead-lettered by redaction as pii_in_acl and its text appears on no topic past
redaction; labels outside the grammar are dead-lettered by ingest as bad_acl.
"""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from services.cli.mesh import Endpoints as RunningMesh
from shared.contract.topics import DOC_VERSIONS, all_topic_specs
from tests.support.mesh import produce, read_topic, uid
from tests.support.polling import eventually
from tests.support.sealed import opened_text

pytestmark = pytest.mark.integration
# May hold raw input by design (ingest's side of redaction).
UPSTREAM = {"docs.raw.v1", "docs.parsed.v1", "docs.normalized.v1", "deadletter.raw.v1",
            DOC_VERSIONS.changelog}


def values(mesh: RunningMesh, topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in read_topic(mesh, topic) if r.value]


def embedded(mesh: RunningMesh, ids: set[str]) -> dict[tuple[str, int], dict[str, Any]]:
    """The embedded chunk sets of `ids` so far, by (doc id, version)."""
    return {(v["doc_id"], v["version"]): v for v in values(mesh, "chunks.embedded.v1")
            if v["doc_id"] in ids}


@pytest.fixture(scope="module")
def flowed(mesh: RunningMesh) -> dict[str, Any]:
    tag = uid("acl")
    # Digits only this run uses, so "nowhere past redaction" cannot be met by chance.
    phone = f"555{random.SystemRandom().randrange(10**7):07d}"
    ids = {"plain": f"acl-plain-{tag}", "cdc": f"hr.memos/acl-cdc-{tag}",
           "api": f"acl-api-{tag}", "pii": f"acl-pii-{tag}"}
    text = "The quarterly payments reconciliation runs every Friday after the ledger closes."
    produce(mesh, [json.dumps({"id": ids["plain"], "source": f"acl-{tag}", "text": text,
                               "acl": ["payments"]}).encode(),
                   json.dumps({"payload": {
                       "op": "c", "before": None, "ts_ms": 1795947600000,
                       "source": {"db": "hr", "table": "memos"},
                       "after": {"id": f"acl-cdc-{tag}", "title": "Memo",
                                 "body": "Parental leave requests go to the HR portal.",
                                 "acl": "hr,user:ann"}}}).encode(),
                   json.dumps({"id": ids["pii"], "source": f"acl-{tag}", "text": text,
                               "acl": ["eng", f"user:{phone}"]}).encode(),
                   json.dumps({"id": f"acl-bad-{tag}", "source": f"acl-{tag}", "text": text,
                               "acl": ["no spaces allowed"]}).encode()])
    produce(mesh, [json.dumps({"ticket": {
        "id": ids["api"], "subject": "Refund", "description": "The refund was approved.",
        "acl": ["support", "emea"], "updated_at": "2026-11-27T10:00:00Z"}}).encode()],
        headers=[("streamrag-source", b"tickets")])
    want = {(ids["plain"], 1), (ids["cdc"], 1), (ids["api"], 1)}
    eventually(lambda: want <= set(embedded(mesh, set(ids.values()))),
               "the three labelled documents to be embedded")
    # The same document again, only its labels changed: payments revoked, payments-ops in.
    produce(mesh, [json.dumps({"id": ids["plain"], "source": f"acl-{tag}", "text": text,
                               "acl": ["payments-ops"]}).encode()])
    eventually(lambda: (ids["plain"], 2) in embedded(mesh, set(ids.values())),
               "the labels-only version to be embedded")

    def refused() -> list[dict[str, Any]]:
        return [v for v in values(mesh, "deadletter.v1") if v.get("key") == ids["pii"]]
    letters = eventually(refused, "the PII-labelled document to be dead-lettered")
    return {"tag": tag, "ids": ids, "phone": phone, "letters": letters,
            "embedded": embedded(mesh, set(ids.values()))}


def test_each_shape_reaches_every_chunk_with_exactly_its_labels(
        flowed: dict[str, Any]) -> None:
    ids, got = flowed["ids"], flowed["embedded"]
    assert got[(ids["plain"], 1)]["acl"] == ["payments"]
    assert got[(ids["cdc"], 1)]["acl"] == ["hr", "user:ann"]
    assert got[(ids["api"], 1)]["acl"] == ["emea", "support"]
    for key in [(ids["plain"], 1), (ids["cdc"], 1), (ids["api"], 1)]:
        assert got[key]["op"] == "upsert" and got[key]["chunks"], key


def test_a_labels_only_change_is_a_new_embedded_version_with_the_new_labels(
        flowed: dict[str, Any]) -> None:
    ids, got = flowed["ids"], flowed["embedded"]
    v1, v2 = got[(ids["plain"], 1)], got[(ids["plain"], 2)]
    assert v2["acl"] == ["payments-ops"] and v1["acl"] == ["payments"]
    assert [c["text"] for c in v2["chunks"]] == [c["text"] for c in v1["chunks"]]
    assert not any(doc_id == ids["plain"] and version > 2 for doc_id, version in got)


def test_a_label_hiding_pii_is_dead_lettered_and_appears_nowhere_past_redaction(
        mesh: RunningMesh, flowed: dict[str, Any]) -> None:
    (letter,) = flowed["letters"]
    assert (letter["stage"], letter["reason"], letter["field"]) == ("redaction", "pii_in_acl",
                                                                    "acl")
    assert letter["payload_b64"] is None
    assert not any(doc_id == flowed["ids"]["pii"] for doc_id, _ in flowed["embedded"])
    phone, scanned = flowed["phone"], []
    for spec in all_topic_specs():
        if spec.name in UPSTREAM:
            continue
        records = read_topic(mesh, spec.name)
        scanned.append(spec.name)
        for r in records:
            blob = b"\n".join([r.key or b"", r.value or b"", *(v for _, v in r.headers or ()),
                               opened_text(mesh, r.value).encode()])  # sealed: opened too
            assert phone.encode() not in blob, (spec.name, r.offset)
    assert {"deadletter.v1", "docs.redacted.v1", "chunks.embedded.v1"} <= set(scanned)


def test_labels_outside_the_grammar_are_dead_lettered_at_ingest(
        mesh: RunningMesh, flowed: dict[str, Any]) -> None:
    def bad() -> list[dict[str, Any]]:
        mine = f'"acl-bad-{flowed["tag"]}"'.encode()
        return [v for v in values(mesh, "deadletter.raw.v1")
                if mine in base64.b64decode(v.get("payload_b64") or "")]
    (letter,) = eventually(bad, "the bad labels' dead letter")
    assert (letter["stage"], letter["reason"], letter["field"]) == ("ingest", "bad_acl", "acl")
