"""The identifier rule reads ids as redaction reads text (percent-decoded, NFKC, every
script's digits, base64 and hex decoded) and refuses every PII-bearing form, while the
ids systems make (tickets, orders, dates, builds, UUIDs, numeric keys) pass."""

from __future__ import annotations

import base64
import random
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.ingest.identifiers import check_identifier, pii_kind
from shared.errors import InvalidInput
from tests.unit.redaction import pii_forms as forms


@pytest.mark.parametrize(("value", "kind"), [
    ("case-7-rezendeyasmin%40naver.com", "EMAIL_ADDRESS"),
    ("ticket-９７１-５６-７６７-６２００", "PHONE_NUMBER"),
    ("id-" + base64.b64encode(b"anna@example.com").decode(), "EMAIL_ADDRESS"),
    ("id_" + base64.urlsafe_b64encode(b"rezendeyasmin@naver.com").decode().rstrip("="),
     "EMAIL_ADDRESS"),
    ("hex-" + b"anna@example.com".hex(), "EMAIL_ADDRESS"),
    ("crm-394.115.739-67", "BR_CPF"),
    ("cpf-39411573967", "BR_CPF"),
    ("cust/11.222.333/0001-81", "BR_CNPJ"),
    ("kyc-11010519491231002X", "CN_RESIDENT_ID"),
    ("rrn-910411-1777631", "KR_RRN"),
    ("aadhaar-4991-1866-5246", "IN_AADHAAR"),
    ("user-44-20-7946-0958", "PHONE_NUMBER"),
    ("callback-030-1234-5678", "PHONE_NUMBER"),
    ("doc-аnna@exаmple.com", "EMAIL_ADDRESS"),  # Cyrillic а
    ("lead-%2B4930901820", "PHONE_NUMBER"),
    ("card-\u0664\u0661\u0661\u0661-1111-1111-1111", "CREDIT_CARD"),  # Arabic-Indic 4
])
def test_pii_bearing_ids_are_refused_naming_the_kind(value: str, kind: str) -> None:
    assert pii_kind(value) == kind
    with pytest.raises(InvalidInput) as err:
        check_identifier(value, "doc_id")
    assert err.value.reason == "pii_in_identifier" and kind in err.value.detail
    assert value not in str(err.value)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(forms.MAKERS.keys() - {"RU_PASSPORT"})), st.integers(0, 2**32),
       st.sampled_from(["printed", "fullwidth", "percent", "base64", "script"]))
def test_every_encoding_of_a_printed_number_in_an_id_is_refused(kind: str, seed: int,
                                                                form: str) -> None:
    printed = forms.printed(kind, forms.MAKERS[kind](random.Random(seed)))
    value = {"printed": printed, "fullwidth": forms.in_script(printed, 0xFF10),
             "percent": quote(printed, safe=""), "script": forms.in_script(printed, 0x0966),
             "base64": base64.b64encode(f"ref {printed}".encode()).decode()}[form]
    assert pii_kind(f"acct-{value}") is not None, (kind, value)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32))
def test_ordinary_ids_pass(seed: int) -> None:
    rng = random.Random(seed)
    y, m, d = rng.randint(2019, 2030), rng.randint(1, 12), rng.randint(1, 28)
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 11)))
    for value in (f"INC-{y}-{rng.randint(1, 99999):05d}", f"ORD-{y}-{rng.randint(0, 999999)}",
                  f"{y}-{m:02d}-{d:02d}T09:14:00Z", f"payments/{y}-{m:02d}-{d:02d}/run-17",
                  f"build-{y}{m:02d}{d:02d}.{rng.randint(1, 9)}", f"v{m}.{d}.{rng.randint(0, 99)}",
                  digits, f"kb/{digits}", f"shop.orders/{digits}",
                  f"PO-{rng.choice('45')}{rng.randint(0, 10**9 - 1):09d}",
                  f"{rng.getrandbits(128):032x}",
                  f"sku-AB-{rng.randint(1000, 9999)}-XL", f"doc%20{rng.randint(1, 999)}"):
        assert pii_kind(value) is None, value
