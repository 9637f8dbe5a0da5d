"""Subject keys: one person's value keys alike however it is written, other values do not,
and a subject index record holds no value in clear."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from services.redaction.subjects import Masked, Redacted, SubjectKeys
from shared.contract.codec import encode
from shared.contract.records import RedactedDocument
from shared.contract.subjects import (
    PHONE_REGIONS,
    key_id,
    key_of,
    keys_to_find,
    normalised,
    phone_forms,
)

KEY = b"unit-test-subject-key"
LOCAL = st.text("abcdefghijklmnopqrstuvwxyz0123456789._", min_size=1, max_size=12)
DOMAIN = st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=10)
SUBSCRIBER = st.integers(200, 999).map(str)  # US area and exchange codes start at 2


def _hmac(kind: str, form: str, key: bytes = KEY) -> str:
    return hmac.new(key, f"{kind}\x00{form}".encode(), hashlib.sha256).hexdigest()


def _flip(text: str, upper: list[bool]) -> str:
    return "".join(c.upper() if u else c for c, u in zip(text, upper * len(text), strict=False))


def test_the_key_is_hmac_sha256_of_kind_nul_normalised_value() -> None:
    assert key_of(KEY, "email", " Ann.Lee@Example.COM ") == _hmac("email", "ann.lee@example.com")
    assert key_of(KEY, "phone", "+1 (415) 555-0132") == _hmac("phone", "+14155550132")
    assert key_of(KEY, "id", "123-45-6789") == _hmac("id", "123456789")
    assert key_of(KEY, "id", "de89 3704 0044 0532 0130 00") == _hmac("id",
                                                                     "DE89370400440532013000")
    assert key_of(KEY, "name", "  Ann \n Lee ") == _hmac("name", "ann lee")
    assert key_of(b"another key", "email", "ann@x.org") != key_of(KEY, "email", "ann@x.org")


@given(LOCAL, DOMAIN, st.lists(st.booleans(), min_size=1, max_size=5),
       st.sampled_from(["", " ", "\t", "  \n"]))
def test_an_email_written_in_any_case_or_spacing_keys_alike(local: str, domain: str,
                                                            upper: list[bool],
                                                            pad: str) -> None:
    plain = f"{local}@{domain}.com"
    written = pad + _flip(plain, upper) + pad
    assert key_of(KEY, "email", written) == key_of(KEY, "email", plain)
    assert key_of(KEY, "email", written) in keys_to_find(KEY, "email", plain.upper())


@given(LOCAL, LOCAL, DOMAIN)
def test_different_emails_key_differently(one: str, two: str, domain: str) -> None:
    a, b = f"{one}@{domain}.org", f"{two}@{domain}.org"
    assert (key_of(KEY, "email", a) == key_of(KEY, "email", b)) == (a == b)


@given(SUBSCRIBER, SUBSCRIBER, st.integers(0, 9999).map(lambda n: f"{n:04d}"),
       st.sampled_from(["+1 ({a}) {b}-{c}", "+1-{a}-{b}-{c}", "+1{a}{b}{c}", "1 {a} {b} {c}",
                        "({a}) {b}-{c}", "{a}.{b}.{c}", "{a} {b} {c}", "{a}-{b}-{c}"]))
def test_a_phone_number_written_any_way_is_found_by_any_other_way(a: str, b: str, c: str,
                                                                  form: str) -> None:
    """Indexed as written in a document, found as an operator types it (and back)."""
    written = form.format(a=a, b=b, c=c)
    canonical = f"+1 {a} {b} {c}"
    if phone_forms(canonical)[0] != f"+1{a}{b}{c}":
        return  # not a valid North American number: digits only, tested below
    assert key_of(KEY, "phone", written) == _hmac("phone", f"+1{a}{b}{c}")
    assert normalised("phone", written) == phone_forms(written)[0]  # indexed: the likeliest
    assert key_of(KEY, "phone", written) in keys_to_find(KEY, "phone", f"{a}-{b}-{c}")
    assert key_of(KEY, "phone", canonical) in keys_to_find(KEY, "phone", written)


def test_a_national_number_is_found_by_its_international_form_and_back() -> None:
    indexed = key_of(KEY, "phone", "020 7946 0958")  # a London number, written in the UK
    assert indexed == _hmac("phone", "+442079460958")
    assert indexed in keys_to_find(KEY, "phone", "+44 20 7946 0958")
    assert key_of(KEY, "phone", "+44 (0)20 7946-0958") in keys_to_find(KEY, "phone",
                                                                       "020 7946 0958")
    assert normalised("phone", "12") == "12"  # no number at all: its digits


@given(st.integers(2_000_000, 9_999_999), st.integers(2_000_000, 9_999_999))
def test_different_phone_numbers_key_differently(one: int, two: int) -> None:
    a, b = f"+1 415 {one}", f"+1 415 {two}"
    assert (key_of(KEY, "phone", a) == key_of(KEY, "phone", b)) == (one == two)


@given(st.text("0123456789ABCDEFabcdef", min_size=4, max_size=20),
       st.sampled_from(["-", " ", ".", "/", ""]))
def test_identifiers_key_alike_whatever_their_separators_and_case(ident: str, sep: str,
                                                                  ) -> None:
    written = sep.join(ident[i:i + 3] for i in range(0, len(ident), 3)).lower()
    assert key_of(KEY, "id", written) == _hmac("id", ident.upper())


@given(st.lists(st.text("abcdefghijklmnopqrstuvwxyzäöüé", min_size=1, max_size=8),
                min_size=1, max_size=3), st.sampled_from([" ", "  ", "\t", "\n "]))
def test_names_key_alike_in_any_case_and_spacing(parts: list[str], gap: str) -> None:
    written = gap.join(p.title() for p in parts)
    assert key_of(KEY, "name", written) == _hmac("name", " ".join(parts).casefold())


def test_one_value_of_two_kinds_keys_differently() -> None:
    assert key_of(KEY, "id", "4155550132") != key_of(KEY, "phone", "4155550132")


# Letters that no hex digit, field name or batch id of a record is made of, so a value
# found in the record's bytes is the value, not a chance match.
UNHEX = st.text("ghijklmnopqrstuvwxyz", min_size=4, max_size=10)
VALUES = st.tuples(UNHEX, UNHEX, st.integers(2_000_000, 9_999_999), UNHEX)


@given(VALUES)
def test_the_index_record_holds_no_masked_value_in_clear(values: tuple[str, str, int, str],
                                                         ) -> None:
    local, domain, number, name = values
    email, phone = f"{local}@{domain}.net", f"+1 212 {number}"
    masked = (Masked("EMAIL_ADDRESS", email), Masked("PHONE_NUMBER", phone),
              Masked("PERSON", f"Dr {name.title()}"), Masked("US_SSN", "078-05-1120"),
              Masked("LOCATION", "Berlin"), Masked("SECRET", "hunter2hunter2"))
    doc = RedactedDocument(doc_id="d", version=3, source="s", event_time=0, ingest_time=0,
                           batch_id="ep/docs.normalized.v1/0/0-0")
    record = SubjectKeys(KEY, PHONE_REGIONS).index(Redacted(doc, masked))
    encoded = encode(record)
    for clear in (email, local, domain, phone, f"212{number}", str(number), name,
                  name.title(), "078-05-1120", "078051120", "Berlin", "hunter2"):
        assert clear.encode() not in encoded and clear.casefold().encode() not in encoded
    assert record.subjects == tuple(sorted({
        _hmac("email", email), _hmac("phone", f"+1212{number}") if
        phone_forms(phone)[0].startswith("+") else _hmac("phone", f"1212{number}"),
        _hmac("name", f"dr {name}"), _hmac("id", "078051120")}))
    assert record.kinds == {"email": 1, "phone": 1, "name": 1, "id": 1}  # not the others
    assert (record.doc_id, record.version, record.key_id) == ("d", 3, key_id(KEY))
    assert "hunter2" not in repr(masked) and email not in repr(Redacted(doc, masked))


def test_a_value_masked_twice_is_indexed_once() -> None:
    doc = RedactedDocument(doc_id="d", version=1, source="s", event_time=0, ingest_time=0)
    masked = (Masked("EMAIL_ADDRESS", "Ann@X.org"), Masked("EMAIL_ADDRESS", "ann@x.org "),
              Masked("PERSON", "   "))
    record = SubjectKeys(KEY, PHONE_REGIONS).index(Redacted(doc, masked))
    assert record.subjects == (_hmac("email", "ann@x.org"),) and record.kinds == {"email": 1}
