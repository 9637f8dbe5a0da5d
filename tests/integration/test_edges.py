"""Edge inputs on the real one-process mesh, produced the way a user's client would:
hidden characters around a card number, personal data in identifier fields, names in a
chat transcript's speaker labels (and alone after them), CDC rows of two tables with one
key, a CDC row taking a plain document's id, invisible-only text, C1 controls, duplicate
JSON keys and source headers, a Debezium truncate (refused by default), a 700 KB key.

Each record carries its own Kafka key, so its dead letter (which keeps the key, bounded)
is found by it; a record behind them all must still become searchable."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from services.cli.mesh import Endpoints
from shared.text.visible import reading_view
from tests.support.mesh import chunks_of, produce, read_topic, uid
from tests.support.polling import eventually
from tests.support.sealed import opened

pytestmark = pytest.mark.integration
CARD = "4111111111111111"


def cdc(table: str, pk: str, body: str) -> bytes:
    return json.dumps({"payload": {
        "op": "c", "before": None, "ts_ms": 1795947600000,
        "source": {"db": "edges", "table": table},
        "after": {"id": pk, "title": table, "body": body}}}).encode()


def plain(doc_id: str, text: str, **extra: Any) -> bytes:
    return json.dumps({"id": doc_id, "source": "edges", "text": text, **extra}).encode()


def dead_letters(mesh: Endpoints) -> dict[str, str]:
    """{key: reason} of every dead letter on both dead-letter topics."""
    out: dict[str, str] = {}
    for topic in ("deadletter.raw.v1", "deadletter.v1"):
        for r in read_topic(mesh, topic):
            letter = json.loads(r.value)
            if letter.get("key"):
                out[letter["key"]] = letter["reason"]
            if letter.get("key_sha256"):
                out[letter["key_sha256"]] = letter["reason"]
    return out


def test_the_edges_of_the_issue_on_the_real_mesh(onebox_mesh: Endpoints) -> None:
    mesh = onebox_mesh
    tag = uid("edge")
    refused: dict[str, str] = {}  # key -> the reason its dead letter must give

    def send(key: str, value: bytes, reason: str | None = None,
             headers: list[tuple[str, bytes]] | None = None) -> None:
        produce(mesh, [value], key=key.encode(), headers=headers)
        if reason is not None:
            refused[key] = reason

    hidden = "\u200b".join(CARD[i:i + 4] for i in range(0, 16, 4))
    send(f"{tag}-hidden", plain(f"{tag}-hidden", f"Lighthouse invoice paid with card "
                                                 f"{hidden} and {CARD[:4]}\u00ad{CARD[4:]}."))
    send(f"{tag}-pii-id", plain(f"case-{CARD}", "Some text."), "pii_in_identifier")
    send(f"{tag}-pii-key", plain(f"{tag}-k", "Some text.",
                                 metadata={"anna.weber@example.com": "x"}), "pii_in_identifier")
    send(f"{tag}-pii-table", cdc(f"t_{CARD}", "1", "Some text."), "pii_in_identifier")
    send(f"{tag}-blank", plain(f"{tag}-blank", "\u200b\ufeff\u2800 \u3164"), "empty_text")
    send(f"{tag}-c1", plain(f"{tag}-c1", "text with \u0085 a C1 control"), "binary_content")
    send(f"{tag}-dupkey", f'{{"id": "{tag}-d", "source": "s", "text": "t", "op": "upsert", '
                          f'"op": "delete"}}'.encode(), "duplicate_key")
    send(f"{tag}-dupheader", json.dumps({"ticket": {"id": f"{tag}-T", "description": "d"}}
                                        ).encode(), "invalid_header",
         headers=[("streamrag-source", b"tickets"), ("streamrag-source", b"tickets")])
    send(f"{tag}-truncate", json.dumps({"payload": {
        "op": "t", "before": None, "after": None, "ts_ms": 1795947600000,
        "source": {"db": "edges", "table": "orders"}}}).encode(), "truncate_refused")
    # Two tables, one key: two documents. Then a plain document takes a CDC row's id.
    send(f"{tag}-orders", cdc("orders", tag, "Orders row about the walrus expedition."))
    send(f"{tag}-customers", cdc("customers", tag, "Customers row about the walrus choir."))
    # Behind the row on its raw partition (same key), so the row is the id's first owner.
    send(f"{tag}-orders", plain(f"edges.orders/{tag}", "A plain page taking the row's id."))
    refused[f"edges.orders/{tag}"] = "id_collision"  # refused past parsing: keyed by doc id
    chat = ("[09:15] Priyanka Raghunathan: the settlement job is stuck again\n"
            "[09:16] Oluwaseun Adebayo: restarting the consumer now\n"
            "[09:18] Priyanka Raghunathan: thanks, Adebayo - lag is draining")
    send(f"{tag}-chat", plain(f"{tag}-chat", chat))
    huge = (f"{tag}-huge-" + "k" * 700_000).encode()
    produce(mesh, [b"{not json"], key=huge)
    refused[hashlib.sha256(huge).hexdigest()] = "malformed_json"
    behind = f"{tag}-behind"
    send(behind, plain(behind, "The saffron harvest report came after every edge case."))

    eventually(lambda: chunks_of(mesh, "saffron harvest report", behind),
               "the record behind every edge case")
    letters = eventually(lambda: (d if set(refused) <= set(d := dead_letters(mesh)) else None),
                         "a dead letter for every refused record")
    assert {k: letters[k] for k in refused} == refused

    # Keys land on partitions of their own, so the record behind them all says nothing of
    # when the others are done: wait for each.
    orders = eventually(lambda: chunks_of(mesh, "walrus expedition", f"edges.orders/{tag}"),
                        "the orders row")
    customers = eventually(lambda: chunks_of(mesh, "walrus choir", f"edges.customers/{tag}"),
                           "the customers row")
    assert "expedition" in orders[0].text and "choir" in customers[0].text

    def redacted_of(key: str) -> list[dict[str, Any]]:
        return [opened(mesh, r.value) for r in read_topic(mesh, "docs.redacted.v1")
                if r.key == key.encode()]

    talk = eventually(lambda: redacted_of(f"{tag}-chat"), "the chat transcript, redacted")
    for name in ("Priyanka", "Raghunathan", "Oluwaseun", "Adebayo"):
        assert name not in talk[-1]["text"], talk[-1]["text"]
    assert "settlement job is stuck" in talk[-1]["text"]

    redacted = eventually(lambda: redacted_of(f"{tag}-hidden"),
                          "the hidden-card document, redacted")
    seen = reading_view(redacted[-1]["text"]).text
    assert redacted[-1]["entity_counts"].get("CREDIT_CARD") == 2
    assert not re.search(r"\d{4}", seen), seen
