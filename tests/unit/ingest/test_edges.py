"""Ingest at the edges: invisible-only text, C1 controls, duplicate
keys and headers, Debezium truncates, personal data in identifier fields, identities of
CDC rows across tables and sources, replays after a crash, and dead letters of huge keys.

Values come from Faker with seeds and locales drawn by hypothesis; hiding uses the same
forms as tests/unit/shared/test_visible.py."""

from __future__ import annotations

import hashlib
import json

import pytest
from faker import Faker
from hypothesis import given, settings
from hypothesis import strategies as st

from services.ingest.dedup import apply_change, truncated
from services.ingest.identifiers import pii_kind
from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.settings import FieldMapping, IngestSettings
from shared.contract.codec import encode
from shared.contract.dlq import build_dead_letter
from shared.contract.records import Document, TableTruncate
from shared.errors import InvalidInput
from tests.support.hiding import HIDDEN

S = IngestSettings()
TS = 1_700_000_000.0
INVISIBLE = ["\u200b", "\ufeff", "\u2800", "\U000e0020", "\u3164", "\u00ad", "\u2060",
             " ", "\t", "\n", "\u00a0", "\u3000", "\u200e", "\u034f"]
LOCALES = ["en_US", "en_IN", "de_DE", "fr_FR", "pt_BR", "ja_JP", "pl_PL"]


def parse(obj: object, headers: list[tuple[str, bytes]] | None = None,
          s: IngestSettings = S) -> Document:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return parse_raw(RawMessage.from_kafka(raw, TS, headers or []), s, now=1.0)


def refusal(obj: object, **kw: object) -> InvalidInput:
    with pytest.raises(InvalidInput) as err:
        parse(obj, **kw)  # type: ignore[arg-type]
    return err.value


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(INVISIBLE), min_size=1, max_size=40))
def test_text_of_invisible_characters_only_is_empty(text: str) -> None:
    err = refusal({"id": "a", "source": "s", "text": text})
    assert (err.reason, err.field) in {("empty_text", "text"), ("binary_content", "text")}


@pytest.mark.parametrize("code", [0x7F, 0x80, 0x85, 0x9B, 0x9F, 0x01, 0x1B])
@pytest.mark.parametrize("field", ["text", "title", "metadata"])
def test_c1_controls_and_del_are_refused_like_c0(code: int, field: str) -> None:
    doc = {"id": "a", "source": "s", "text": "fine text", "title": "t"}
    if field == "metadata":
        doc["metadata"] = {"k": f"x{chr(code)}y"}  # type: ignore[assignment]
    else:
        doc[field] = f"x{chr(code)}y"
    err = refusal(doc)
    assert err.reason == "binary_content"


def test_duplicate_keys_and_duplicate_source_headers_are_refused() -> None:
    assert refusal(b'{"id": "a", "source": "s", "text": "t", "op": "upsert", "op": "delete"}'
                   ).reason == "duplicate_key"
    err = refusal({"ticket": {"id": "T-1", "description": "d"}},
                  headers=[("streamrag-source", b"tickets"), ("streamrag-source", b"other")])
    assert (err.reason, err.field) == ("invalid_header", "streamrag-source")


TRUNCATE = {"op": "t", "before": None, "after": None, "ts_ms": 1_700_000_500_000,
            "source": {"db": "shop", "table": "orders"}}


def test_a_debezium_truncate_is_refused_unless_truncates_are_applied() -> None:
    assert refusal(TRUNCATE).reason == "truncate_refused"
    cut = parse(TRUNCATE, s=IngestSettings(apply_truncates=True))
    assert isinstance(cut, TableTruncate)
    assert cut.source == "cdc:shop.orders" and cut.event_time == 1_700_000_500.0
    assert cut.position is not None and cut.position.kind == "ts_ms"


def test_a_truncate_deletes_its_tables_live_documents_here_older_than_itself() -> None:
    cut = parse(TRUNCATE, s=IngestSettings(apply_truncates=True))
    assert isinstance(cut, TableTruncate)
    state = {}
    for table, pk, ts in [("orders", 1, 1), ("orders", 2, 2), ("orders", 3, 900),
                          ("customers", 1, 1), ("orders", 4, 3)]:
        row = parse({**cdc(table, pk), "ts_ms": 1_700_000_000_000 + ts * 1000})
        state[row.doc_id] = apply_change(None, row).state
    gone = apply_change(state["shop.orders/4"], parse(
        {"op": "d", "before": {"id": 4, "body": "b"}, "after": None, "ts_ms": 1_700_000_004_000,
         "source": {"db": "shop", "table": "orders"}})).state
    state["shop.orders/4"] = gone  # deleted already: not deleted again
    elsewhere = {"shop.orders/2"}  # keyed to another partition
    out = dict(
        (d.doc_id, a) for d, a in truncated(state.items(), cut, lambda i: i not in elsewhere))
    assert set(out) == {"shop.orders/1"}  # orders/3 changed after the truncate: it stays
    applied = out["shop.orders/1"]
    assert applied.doc is not None and applied.doc.op == "delete" and applied.doc.version == 2
    assert applied.state["deleted"] is True


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, str]:
    """(kind, value) of a Faker value, maybe hidden with invisible characters."""
    fake = Faker(draw(st.sampled_from(LOCALES)))
    fake.seed_instance(draw(st.integers(0, 2**32)))
    kind = draw(st.sampled_from(["CREDIT_CARD", "EMAIL_ADDRESS", "IBAN_CODE"]))
    value = {"CREDIT_CARD": fake.credit_card_number, "EMAIL_ADDRESS": fake.ascii_email,
             "IBAN_CODE": fake.iban}[kind]()
    if draw(st.booleans()):
        value = "".join(ch + draw(st.sampled_from(["", *HIDDEN])) for ch in value)
    return kind, value


@settings(max_examples=150, deadline=None)
@given(planted(), st.sampled_from(["id", "source", "domain", "metadata key", "table", "db",
                                   "header", "prefixed id"]))
def test_personal_data_in_any_identifier_field_is_refused_without_quoting_it(
        value: tuple[str, str], where: str) -> None:
    kind, pii = value
    plain = {"id": "doc-1", "source": "wiki", "text": "ordinary text", "domain": "ops"}
    headers: list[tuple[str, bytes]] = []
    obj: dict[str, object]
    if where in ("table", "db"):
        src = {"db": "shop", "table": "orders", where: pii}
        obj = {"op": "c", "before": None, "after": {"id": 1, "body": "b"}, "source": src}
    elif where == "header":
        obj, headers = {"ticket": {"id": "T-1"}}, [("streamrag-source", pii.encode())]
    elif where == "metadata key":
        obj = {**plain, "metadata": {pii: "x"}}
    elif where == "prefixed id":
        obj = {**plain, "id": f"case-{pii}-2026"}
    else:
        obj = {**plain, where: pii}
    err = refusal(obj, headers=headers)
    if err.reason in ("invalid_id", "invalid_header"):  # refused for a format character
        assert where.endswith(("id", "header")) and "printable" in err.detail + "printable" \
            and any(ch in pii for ch in HIDDEN)
        return
    assert err.reason == "pii_in_identifier", (where, pii)
    assert kind in err.detail
    assert pii not in f"{err.field} {err.detail}" and "@" not in str(err.field)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(LOCALES))
def test_ordinary_identifiers_pass(seed: int, locale: str) -> None:
    fake = Faker(locale)
    fake.seed_instance(seed)
    for value in (fake.uuid4(), fake.slug(), str(fake.random_int(1, 10**11 - 1)),
                  f"INC-{fake.year()}-{fake.random_int(1, 99999):05d}",
                  fake.date_time().isoformat(), f"kb/{fake.random_int()}", fake.word()):
        assert pii_kind(value) is None, value


def cdc(table: str, pk: int, text: str = "row text") -> dict[str, object]:
    return {"op": "c", "before": None, "after": {"id": pk, "body": text},
            "source": {"db": "shop", "table": table}, "ts_ms": 1_700_000_000_000}


def test_rows_of_two_tables_with_one_key_are_two_documents() -> None:
    orders, customers = parse(cdc("orders", 42)), parse(cdc("customers", 42))
    assert (orders.doc_id, customers.doc_id) == ("shop.orders/42", "shop.customers/42")
    assert not orders.shared_id
    shared = IngestSettings(cdc_mappings={"*": FieldMapping(id="id", text="body",
                                                            id_space="shop")})
    a = parse(cdc("orders", 42), s=shared)
    b = parse(cdc("customers", 42), s=shared)
    assert a.doc_id == b.doc_id == "shop/42" and a.shared_id and b.shared_id


def test_a_document_id_of_one_source_is_not_taken_by_another() -> None:
    plain = parse({"id": "shop.orders/42", "source": "wiki", "text": "a runbook"})
    first = apply_change(None, plain)
    row = parse(cdc("orders", 42))
    with pytest.raises(InvalidInput) as err:
        apply_change(first.state, row)
    assert err.value.reason == "id_collision" and "wiki" not in err.value.detail
    # Declared sharing lets it through; so does a delete of the first owner's version.
    shared = row.model_copy(update={"shared_id": True})
    assert apply_change(first.state, shared).doc is not None
    gone = apply_change(first.state, parse({"id": "shop.orders/42", "source": "wiki",
                                            "op": "delete"}))
    assert apply_change(gone.state, row).doc is not None


def test_a_change_replayed_after_later_ones_is_a_duplicate_not_stale() -> None:
    v1 = parse({**cdc("orders", 7, "first"), "ts_ms": 1_700_000_000_000})
    v2 = parse({**cdc("orders", 7, "second"), "ts_ms": 1_700_000_001_000})
    v0 = parse({**cdc("orders", 7, "never applied"), "ts_ms": 1_699_000_000_000})
    one = apply_change(None, v1)
    two = apply_change(one.state, v2)
    replay = apply_change(two.state, v1)  # applied before the crash, replayed after it
    assert replay.doc is None and replay.state == two.state
    with pytest.raises(InvalidInput) as err:
        apply_change(two.state, v0)
    assert err.value.reason == "stale_version"
    assert apply_change(json.loads(json.dumps(two.state)), v1).doc is None


def test_a_dead_letter_keeps_a_bounded_key() -> None:
    key = b"k" * 700_000
    record = build_dead_letter("ingest", InvalidInput("malformed_json"), topic="docs.raw.v1",
                               partition=0, offset=1, key=key, payload=b"{", keep_payload=True)
    assert record.key is not None and len(record.key) < 200
    assert record.key_sha256 == hashlib.sha256(key).hexdigest() and record.key_size == 700_000
    assert len(encode(record)) < 2_000
