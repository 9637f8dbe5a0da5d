"""End to end through the real mesh: plain Kafka producer in, gRPC out, dead letters aside.

The tests taking `each_mode` run on both bring-ups: one process per service and the
one-process default (tests/integration/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from services.cli.mesh import Endpoints as RunningMesh
from services.cli.status import UNCOMMITTED
from shared.contract.topics import ONEBOX_APP, SERVICE_INPUTS, SERVICES
from tests.support.mesh import chunks_of, produce, read_topic, uid
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def test_document_update_and_delete(each_mode: RunningMesh) -> None:
    mesh = each_mode
    doc_id = uid("doc")
    first = "The billing cron job crashed at midnight because the disk of node b7 filled up."
    doc = {"id": doc_id, "text": first, "source": "e2e", "domain": "billing",
           "event_time": "2026-11-28T00:05:00Z", "title": "Billing cron crash"}
    produce(mesh, [json.dumps(doc).encode()], key=doc_id.encode())
    hits = eventually(lambda: chunks_of(mesh, "why did the billing cron job crash", doc_id),
                      "the document to become searchable")
    assert hits[0].text == first
    assert hits[0].version == 1
    assert hits[0].domain == "billing" and hits[0].source == "e2e"
    assert hits[0].event_time == pytest.approx(1795824300.0)

    second = "The billing cron job now runs hourly; disk usage alerts fire at 80 percent."
    # An update is a later change: at the same event time with other text ingest would
    # refuse it as version_conflict (the event time is a plain document's ordering key).
    update = {**doc, "text": second, "event_time": "2026-11-28T01:05:00Z"}
    produce(mesh, [json.dumps(update).encode()], key=doc_id.encode())
    hits = eventually(lambda: [h for h in chunks_of(mesh, "billing cron job node", doc_id)
                               if h.version == 2], "the update to replace the old text")
    assert [h.text for h in hits] == [second]
    assert all(h.version == 2 for h in chunks_of(mesh, "billing cron job node", doc_id))

    produce(mesh, [json.dumps({"id": doc_id, "source": "e2e", "op": "delete"}).encode()],
            key=doc_id.encode())
    eventually(lambda: not chunks_of(mesh, "billing cron job node", doc_id),
               "the delete to remove every chunk")


def test_resent_document_causes_no_new_version(mesh: RunningMesh) -> None:
    doc_id = uid("dup")
    doc = json.dumps({"id": doc_id, "text": "Duplicate detection keeps work down.",
                      "source": "e2e"}).encode()
    produce(mesh, [doc, doc, doc], key=doc_id.encode())
    eventually(lambda: chunks_of(mesh, "duplicate detection", doc_id), "the document")
    versions = [json.loads(r.value)["version"] for r in read_topic(mesh, "docs.normalized.v1")
                if r.key == doc_id.encode()]
    assert versions == [1]


def test_cdc_event_is_normalised(mesh: RunningMesh) -> None:
    row_id = uid("kb")
    event = {"payload": {"before": None, "op": "c", "ts_ms": 1795947600000,
                         "source": {"db": "helpdesk", "table": "kb_articles"},
                         "after": {"id": row_id, "title": "Resetting two-factor tokens",
                                   "body": "Support can reset a two-factor token after a "
                                           "video identity check."}}}
    produce(mesh, [json.dumps(event).encode()])
    doc_id = f"helpdesk.kb_articles/{row_id}"  # a row's id lives in its table's space
    hit = eventually(lambda: chunks_of(mesh, "reset two-factor token", doc_id), "the CDC row")[0]
    assert hit.source == "cdc:helpdesk.kb_articles"
    assert hit.title == "Resetting two-factor tokens"
    assert hit.event_time == pytest.approx(1795947600.0)
    assert hit.domain == "database"


def test_api_record_is_mapped_by_its_source_header(mesh: RunningMesh) -> None:
    ticket_id = uid("T")
    record = {"ticket": {"id": ticket_id, "subject": "Export button greyed out",
                         "description": "The CSV export button stays greyed out for admins.",
                         "priority": "low", "updated_at": "2026-11-27T10:00:00Z"}}
    produce(mesh, [json.dumps(record).encode()], headers=[("streamrag-source", b"tickets")])
    hit = eventually(lambda: chunks_of(mesh, "CSV export button greyed out", ticket_id),
                     "the API record")[0]
    assert (hit.source, hit.domain, hit.title) == ("api:tickets", "support",
                                                   "Export button greyed out")


def test_pii_is_redacted_before_it_is_searchable(each_mode: RunningMesh) -> None:
    mesh = each_mode
    doc_id = uid("pii")
    text = ("Escalation from Jennifer Lawrence: call her at +1 415-555-0199 or write to "
            "jennifer.lawrence@example.com about the refund backlog.")
    produce(mesh, [json.dumps({"id": doc_id, "text": text, "source": "e2e"}).encode()])
    hit = eventually(lambda: chunks_of(mesh, "refund backlog escalation", doc_id), "the doc")[0]
    assert "jennifer.lawrence@example.com" not in hit.text
    assert "555-0199" not in hit.text
    assert "<EMAIL_ADDRESS>" in hit.text and "<PHONE_NUMBER>" in hit.text


BAD_INPUTS: dict[str, bytes] = {
    "malformed_json": b'{"id": "x", "text": ',
    "not_an_object": b'["a", "list"]',
    "wrong_type": json.dumps({"id": "x", "text": 42.5, "source": "e2e"}).encode(),
    "missing_field": json.dumps({"id": "x", "text": "no source"}).encode(),
    "payload_too_large": json.dumps({"id": "x", "text": "a" * 70_000, "source": "e"}).encode(),
    "not_utf8": b'{"id": "x", "text": "\xff\xfe\x00binary", "source": "e2e"}',
    "binary_content": json.dumps({"id": "x", "text": "nul\u0000byte", "source": "e"}).encode(),
    "unknown_schema_version": json.dumps({"schema_version": 99, "id": "x", "text": "t",
                                          "source": "e2e"}).encode(),
    "empty_value": b"",
}


def test_each_bad_input_is_dead_lettered_with_its_reason(each_mode: RunningMesh) -> None:
    mesh = each_mode
    marker = uid("bad").encode()
    produce(mesh, list(BAD_INPUTS.values()), key=marker)

    def letters() -> dict[str, dict[str, Any]]:
        out = {}
        for rec in read_topic(mesh, "deadletter.raw.v1"):
            if rec.key == marker:
                letter = json.loads(rec.value)
                out[letter["reason"]] = letter
        return out if len(out) >= len(BAD_INPUTS) else {}

    got = eventually(letters, "every bad input on deadletter.raw.v1")
    assert set(got) == set(BAD_INPUTS)
    assert got["wrong_type"]["field"] == "text"
    assert got["missing_field"]["field"] == "source"
    assert got["unknown_schema_version"]["field"] == "schema_version"
    for letter in got.values():
        assert letter["stage"] == "ingest" and letter["source_topic"] == "docs.raw.v1"
        assert letter["offset"] >= 0 and letter["partition"] >= 0
    # The service kept consuming: a good document after the bad ones still arrives.
    doc_id = uid("after-bad")
    produce(mesh, [json.dumps({"id": doc_id, "text": "Still consuming after poison records.",
                               "source": "e2e"}).encode()], key=marker)
    eventually(lambda: chunks_of(mesh, "still consuming after poison", doc_id), "a good doc")


def test_audit_batches_are_anchored_on_chain(each_mode: RunningMesh) -> None:
    mesh = each_mode
    from web3 import Web3

    def anchors() -> list[dict[str, Any]]:
        # Document batches: query-audit batches (of audit.queries.v1) are announced here too.
        return [a for r in read_topic(mesh, "ledger.anchors.v1")
                if "/audit.queries.v1/" not in (a := json.loads(r.value))["batch_id"]]

    found = eventually(anchors, "an anchored audit batch")
    audits = {json.loads(r.value)["batch_id"]: json.loads(r.value)
              for r in read_topic(mesh, "audit.batches.v1")}
    w3 = Web3(Web3.HTTPProvider(mesh.rpc_url))
    for anchor in found:
        assert anchor["root"] == audits[anchor["batch_id"]]["root"]
        receipt = w3.eth.get_transaction_receipt(anchor["tx_hash"])
        assert receipt["status"] == 1 and receipt["blockNumber"] == anchor["block_number"]


def test_status_finds_every_service_in_its_group(each_mode: RunningMesh) -> None:
    """`streamrag status` reads each service's members and lag from the group that holds its
    offsets: its own in the distributed layout, the one worker's in one-process mode."""
    env = {**os.environ, "STREAMRAG_KAFKA_BOOTSTRAP": each_mode.bootstrap,
           "STREAMRAG_MESH_RUN_DIR": str(each_mode.run_dir),
           "STREAMRAG_MESH_INFERENCE_TARGET": each_mode.grpc_target}
    out = subprocess.run([sys.executable, "-m", "services.cli.main", "status", "--json"],
                         capture_output=True, text=True, env=env, timeout=120, check=True)
    shown = json.loads(out.stdout)
    rows = {r["service"]: r for r in shown["services"]}
    assert set(rows) == set(SERVICES)
    # Every stage's live workers wrote their progress; counts run since the first start.
    assert shown["counting_since"] and shown["counting_since"] < time.time()
    assert shown["stage_progress"] and all(p["workers"] >= 1
                                           for p in shown["stage_progress"].values())
    # Read without a group from its end: no lag to show, never a figure growing for ever.
    assert "search.replies.v1" not in rows["inference"]["lag"]
    onebox = each_mode.run_dir.joinpath("logs", "onebox.log").exists()
    for service, row in rows.items():
        # A test may add a worker of one service beside the one-process worker
        # (test_local_search: an inference worker searching by broker); its group then
        # has members of its own and is the one shown.
        own = service == "inference" and onebox and row["group"] == SERVICES[service]
        assert row["group"] == (ONEBOX_APP if onebox and not own else SERVICES[service]), row
        assert row["members"] and row["members"] >= 1, row
        assert set(row["lag"]) == {t.name for t in SERVICE_INPUTS[service]
                                   if (service, t.name) not in UNCOMMITTED}, row
