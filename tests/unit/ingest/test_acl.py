"""Access labels at ingest: taken from each input shape, defaulted when absent, refused
with a reason when they are not names, and part of what dedup compares, so a version whose
only change is its labels is a new version (a revoked group loses access as fast as any
content change reaches the index)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.ingest.dedup import apply_change
from services.ingest.normalize import RawMessage, parse_raw
from services.ingest.settings import FieldMapping, IngestSettings
from shared.contract.access import LABEL, MAX_LABELS
from shared.contract.records import Document
from shared.errors import InvalidInput
from tests.support.hiding import HIDDEN, ODD_SPACES, digit_forms

S = IngestSettings(max_payload_bytes=65536)
OPEN = IngestSettings(max_payload_bytes=65536, default_acl="public")
SRC = {"db": "hr", "table": "memos"}


def msg(obj: dict[str, Any], headers: dict[str, bytes] | None = None) -> RawMessage:
    return RawMessage(value=json.dumps(obj).encode(), timestamp=1.7e9, headers=headers or {})


def plain(acl: Any = None, text: str = "hello", **extra: Any) -> dict[str, Any]:
    obj = {"id": "a", "text": text, "source": "s", **extra}
    return obj if acl is None else {**obj, "acl": acl}


def cdc(row_acl: Any = None, column: str = "acl", op: str = "c") -> dict[str, Any]:
    row = {"id": 7, "body": "memo body", "title": "T"}
    if row_acl is not None:
        row[column] = row_acl
    side = "before" if op == "d" else "after"
    return {"payload": {"op": op, side: row, "source": SRC, "ts_ms": 1_700_000_000_000}}


def api(acl: Any = None, **ticket: Any) -> dict[str, Any]:
    t = {"id": "T-1", "subject": "S", "description": "D", **ticket}
    if acl is not None:
        t["acl"] = acl
    return {"ticket": t}


TICKETS = {"streamrag-source": b"tickets"}


def parsed(obj: dict[str, Any], s: IngestSettings = S,
           headers: dict[str, bytes] | None = None) -> Document:
    doc = parse_raw(msg(obj, headers), s, now=1.0)
    assert isinstance(doc, Document)
    return doc


def refused(obj: dict[str, Any], s: IngestSettings = S,
            headers: dict[str, bytes] | None = None) -> tuple[str, str | None]:
    with pytest.raises(InvalidInput) as err:
        parse_raw(msg(obj, headers), s, now=1.0)
    return err.value.reason, err.value.field


# -- each shape ---------------------------------------------------------------------------

def test_plain_labels_are_sorted_and_unique_from_a_list_or_a_comma_string() -> None:
    assert parsed(plain(["payments", "eng", "payments"])).acl == ("eng", "payments")
    assert parsed(plain(" user:ann ,payments,, ")).acl == ("payments", "user:ann")


def test_a_document_naming_no_labels_gets_the_default_and_deny_is_the_default() -> None:
    assert parsed(plain()).acl == ()
    assert parsed(plain(), OPEN).acl == ("public",)
    assert parsed({**plain(), "acl": None}, OPEN).acl == ("public",)
    # Labels given, even none, are the document's own: an empty list never opens it.
    assert parsed(plain([]), OPEN).acl == ()
    assert parsed(plain(["eng"]), OPEN).acl == ("eng",)


def test_cdc_labels_come_from_the_acl_column_or_the_mapped_one() -> None:
    assert parsed(cdc(["payments"])).acl == ("payments",)
    assert parsed(cdc("b,a")).acl == ("a", "b")
    assert parsed(cdc(), OPEN).acl == ("public",)  # no column: the default
    mapped = IngestSettings(cdc_mappings={"hr.memos": FieldMapping(
        id="id", text="body", title="title", acl="readers")})
    assert parsed(cdc(["hr"], column="readers"), mapped).acl == ("hr",)
    assert refused(cdc([7], column="readers"), mapped) == ("bad_acl", "after.readers")
    # "" reads no column at all: the row's `acl` column is then just a column.
    off = IngestSettings(default_acl="staff", cdc_mappings={
        "*": FieldMapping(id="id", text="body", acl="")})
    assert parsed(cdc(["payments"]), off).acl == ("staff",)


def test_a_json_column_holding_a_list_is_read_as_that_list() -> None:
    assert parsed(cdc('["payments", "eng"]')).acl == ("eng", "payments")
    assert parsed(cdc("[]"), OPEN).acl == ()
    for bad in ['["a", 1]', "[not json", '["a" ', "[" * 5000, '{"a": 1}', '["has space"]']:
        assert refused(cdc(bad)) == ("bad_acl", "after.acl"), bad


def test_api_labels_come_from_the_mappings_json_path() -> None:
    assert parsed(api(["support", "user:bob"]), headers=TICKETS).acl == ("support", "user:bob")
    assert parsed(api(), OPEN, headers=TICKETS).acl == ("public",)
    nested = IngestSettings(api_mappings={"crm": FieldMapping(
        id="rec.id", text="rec.body", acl="rec.access.groups")})
    rec = {"rec": {"id": "r1", "body": "b", "access": {"groups": "sales,emea"}}}
    assert parsed(rec, nested, headers={"streamrag-source": b"crm"}).acl == ("emea", "sales")
    assert refused(api("not a name!"), headers=TICKETS) == ("bad_acl", "ticket.acl")


def test_bad_labels_are_dead_lettered_with_the_field() -> None:
    for bad in [7, {"g": 1}, ["ok", 3], ["has space"], ["-lead"], ["x" * 129], ["ü"],
                [f"g{i}" for i in range(MAX_LABELS + 1)], [None], True]:
        assert refused(plain(bad)) == ("bad_acl", "acl"), bad
    assert refused(cdc(["a@b.example"])) == ("bad_acl", "after.acl")


def test_the_error_never_quotes_a_label() -> None:
    with pytest.raises(InvalidInput) as err:
        parse_raw(msg(plain(["ok", "bad label 555-0100"])), S, now=1.0)
    assert "555" not in str(err.value) and "bad label" not in str(err.value)


def test_a_delete_carries_no_labels_whatever_it_says() -> None:
    assert parsed(plain(["eng"], op="delete"), OPEN).acl == ()
    assert parsed(plain("not a name!", op="delete")).acl == ()  # a delete's labels unused
    assert parsed(cdc(["eng"], op="d"), OPEN).acl == ()
    assert parsed(api(["eng"], ), OPEN, headers=TICKETS).acl == ("eng",)
    assert parsed({**api(["eng"]), "deleted": True}, OPEN, headers=TICKETS).acl == ()


def test_the_default_is_checked_at_start_naming_the_variable() -> None:
    with pytest.raises(ValidationError, match="STREAMRAG_INGEST_DEFAULT_ACL"):
        IngestSettings(default_acl="public, not a name")
    assert IngestSettings(default_acl="public,staff").default_labels == ("public", "staff")


# -- dedup: labels are part of the content --------------------------------------------------

def test_a_change_of_labels_only_is_a_new_version_and_reordering_them_is_not() -> None:
    first = apply_change(None, parsed(plain(["eng", "payments"])))
    again = apply_change(first.state, parsed(plain("payments,eng")))
    assert again.doc is None  # the same labels in another order: a duplicate
    revoked = apply_change(first.state, parsed(plain(["eng"])))
    assert revoked.doc is not None
    assert (revoked.doc.version, revoked.doc.acl, revoked.doc.text) == (2, ("eng",), "hello")


def test_a_document_without_labels_keeps_the_hash_it_had_before_labels() -> None:
    # Hash of [op, text, title, domain as given, metadata] as ingest computed it before.
    old = hashlib.sha256(json.dumps(["upsert", "hello", "", "", []]).encode()).hexdigest()
    assert parsed(plain()).content_hash == old != parsed(plain(["eng"])).content_hash


# -- properties ---------------------------------------------------------------------------

labels = st.from_regex(LABEL, fullmatch=True)
label_lists = st.lists(labels, max_size=MAX_LABELS)


def shaped(shape: str, acl: Any) -> tuple[dict[str, Any], dict[str, bytes] | None]:
    if shape == "plain":
        return plain(acl), None
    if shape == "cdc":
        return cdc(acl), None
    return api(acl), TICKETS


def field_of(shape: str) -> str:
    return {"plain": "acl", "cdc": "after.acl", "api": "ticket.acl"}[shape]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["plain", "cdc", "api"]), label_lists, st.booleans())
def test_any_label_list_round_trips_to_the_sorted_unique_tuple(
        shape: str, given_labels: list[str], as_string: bool) -> None:
    value: Any = ",".join(given_labels) if as_string else given_labels
    obj, headers = shaped(shape, value)
    assert parsed(obj, OPEN, headers).acl == tuple(sorted(set(given_labels)))


not_a_label = st.one_of(
    # ("[..." is read as a JSON list: the test above covers those.)
    st.text(min_size=1, max_size=40).filter(lambda t: not LABEL.fullmatch(t) and "," not in t
                                            and t.strip() != ""
                                            and not t.lstrip().startswith("[")),
    st.text(alphabet="abc:._-/019", min_size=129, max_size=140),
)
bad_values = st.one_of(
    st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.dictionaries(st.text(max_size=5), st.integers(-9, 9), max_size=2),
    st.builds(lambda good, bad, i: [*good[:i], bad, *good[i:]], label_lists.map(
        lambda xs: xs[:MAX_LABELS - 1]), st.one_of(not_a_label, st.integers(-9, 9), st.none(),
                                                  st.lists(labels, max_size=2)),
        st.integers(0, MAX_LABELS)),
    st.builds(lambda good, bad: ",".join([*good, bad]), st.lists(labels, max_size=5),
              not_a_label.filter(lambda t: t == t.strip())),
    st.lists(labels, min_size=MAX_LABELS + 1, max_size=MAX_LABELS + 5),
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["plain", "cdc", "api"]), bad_values)
def test_any_value_outside_the_grammar_is_a_bad_acl_dead_letter_never_an_exception(
        shape: str, value: Any) -> None:
    obj, headers = shaped(shape, value)
    try:
        parse_raw(msg(obj, headers), S, now=1.0)
    except InvalidInput as exc:
        assert (exc.reason, exc.field) == ("bad_acl", field_of(shape)), (value, exc)
    else:
        raise AssertionError(f"accepted {value!r}")


@settings(max_examples=100, deadline=None)
@given(label_lists, label_lists)
def test_labels_that_differ_as_sets_make_a_new_version_and_equal_sets_never_do(
        old: list[str], new: list[str]) -> None:
    first = apply_change(None, parsed(plain(old)))
    after = apply_change(first.state, parsed(plain(list(reversed(new)))))
    if set(old) == set(new):
        assert after.doc is None
    else:
        assert after.doc is not None and after.doc.version == 2
        assert after.doc.acl == tuple(sorted(set(new)))


@st.composite
def hidden_digits(draw: st.DrawFn) -> str:
    """A label hiding a phone number the way readers still read it: look-alike digits,
    invisible characters or odd spaces between them. None of these is a name."""
    digits = draw(st.text(alphabet="0123456789", min_size=7, max_size=12))
    out = []
    for ch in digits:
        out.append(draw(st.sampled_from(digit_forms(int(ch)))))
        out.append("".join(draw(st.lists(st.sampled_from(HIDDEN + ODD_SPACES), max_size=1))))
    hidden = "".join(out)
    assume_hidden = hidden != digits
    return f"user:{hidden}" if assume_hidden else f"user:{digits}\u200b"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["plain", "cdc", "api"]), hidden_digits())
def test_a_label_hiding_digits_in_forms_readers_read_is_refused_at_ingest(
        shape: str, label: str) -> None:
    obj, headers = shaped(shape, ["eng", label])
    assert refused(obj, S, headers) == ("bad_acl", field_of(shape))
