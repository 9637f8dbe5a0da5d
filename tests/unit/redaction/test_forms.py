"""Every way a person or a system writes a card, phone or national number is masked whole.

Values come from tests/unit/redaction/pii_forms.py (valid by their own check digits, made
here, no bench seed); hypothesis draws the kind, the form (printed, bare, odd separators,
another script's digits, spelled in a served language, East Asian numerals, letter-spaced,
percent-encoded) and where it stands (prose after a label, a JSON value, a CSV row under
its header, a Markdown table cell, a chat line)."""

from __future__ import annotations

import json
import random
from urllib.parse import quote

import phonenumbers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from tests.unit.redaction import pii_forms as forms

SLOW = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
KEYS = {"BR_CPF": "cpf", "BR_CNPJ": "cnpj", "IN_AADHAAR": "aadhaar", "CN_RESIDENT_ID":
        "id_number", "KR_RRN": "rrn", "DE_TAX_ID": "steuer_id", "RU_PASSPORT": "passport",
        "CREDIT_CARD": "card_number", "PHONE_NUMBER": "phone"}
# Served locales' regions: a phone of each, national and international.
PHONE_REGIONS = ("US", "GB", "DE", "IN", "BR", "CN", "JP", "KR", "RU", "SA", "AE", "EG")


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def phone(rng: random.Random, region: str, international: bool) -> str:
    """A valid mobile number of `region`, digits of its example number changed at random."""
    example = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE)
    assert example is not None
    national = str(example.national_number)
    for _ in range(200):
        digits = national[:3] + "".join(rng.choice("0123456789") for _ in national[3:])
        number = phonenumbers.parse(f"+{example.country_code}{digits}")
        if phonenumbers.is_valid_number(number):
            break
    fmt = (phonenumbers.PhoneNumberFormat.INTERNATIONAL if international
           else phonenumbers.PhoneNumberFormat.NATIONAL)
    return phonenumbers.format_number(number, fmt)


def masked_whole(redactor: Redactor, text: str, value: str) -> bool:
    start = text.index(value)
    found = redactor.analyze([text])[0]
    cover = {i for r in found for i in range(r.start, r.end)}
    return all(i in cover for i in range(start, start + len(value)))


@st.composite
def rendered(draw: st.DrawFn) -> tuple[str, str, str]:
    """(kind, the value as written, the context it stands in)."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    kind = draw(st.sampled_from([*forms.MAKERS, "PHONE_NUMBER"]))
    if kind == "PHONE_NUMBER":
        printed = phone(rng, draw(st.sampled_from(PHONE_REGIONS)), draw(st.booleans()))
        digits = "".join(c for c in printed if c.isdigit() or c == "+")
    else:
        digits = forms.MAKERS[kind](rng)
        printed = forms.printed(kind, digits)
    form = draw(st.sampled_from(["printed", "bare", "separators", "script", "spelled",
                                 "mixed", "east", "spaced", "percent"]))
    groups = [g for g in printed.replace("+", "").replace("(", " ").replace(")", " ")
              .replace("/", " ").replace(".", " ").replace("-", " ").split()]
    lead = "+" if printed.startswith("+") else ""
    if form == "printed":
        value = printed
    elif form == "bare":
        value = digits
    elif form == "separators":
        sep = draw(st.sampled_from(forms.SEPARATORS))
        value = lead + sep.join(groups)
    elif form == "script":
        value = forms.in_script(printed, draw(st.sampled_from(forms.DIGIT_BASES)))
    elif form in ("spelled", "mixed"):
        lang = draw(st.sampled_from(sorted(forms.WORDS)))
        plus = {"en": "plus ", "de": "plus ", "pt": "mais "}.get(lang, "+") if lead else ""
        value = plus + ", ".join(forms.spelled(g, lang, rng, mixed=form == "mixed")
                                 .replace(",", "") for g in groups)
    elif form == "east":
        table = draw(st.sampled_from([forms.CJK, forms.HANGUL]))
        value = lead + "-".join(forms.east_asian(g, table) for g in groups)
    elif form == "spaced":
        value = " ".join(digits)
    else:
        value = quote(printed)
    where = draw(st.sampled_from(["prose", "json", "csv", "table", "chat", "url"]))
    if form in ("spelled", "mixed", "east", "spaced") and where in ("csv", "url"):
        where = "prose"
    if form == "percent":
        where = "url"
    return kind, value, where


def context(kind: str, value: str, where: str) -> str:
    key, label = KEYS[kind], forms.LABELS.get(kind, "phone")
    if where == "prose":
        return f"Please verify the customer's {label}: {value} before Friday."
    if where == "json":
        return json.dumps({"ticket": "T-1042", "customer": {key: value, "tier": "gold"}},
                          ensure_ascii=False)
    if where == "csv":
        return f"id,{key},city,opened\n17,{value},Lisbon,2026-02-25\n18,,Porto,2026-02-26"
    if where == "table":
        return f"| ticket | {key} | status |\n|---|---|---|\n| T-1042 | {value} | open |"
    if where == "chat":
        return f"[09:28] agent: thanks, {label} {value} noted\n[09:29] bot: saved"
    return f"GET https://crm.example.com/lookup?{key}={value}&tier=gold HTTP/1.1"


@SLOW
@given(rendered())
def test_every_form_of_every_number_is_masked_whole(redactor: Redactor,
                                                    case: tuple[str, str, str]) -> None:
    kind, value, where = case
    text = context(kind, value, where)
    shown = json.dumps(value, ensure_ascii=False)[1:-1] if where == "json" else value
    assert masked_whole(redactor, text, shown), (kind, where, text)


def test_the_leaked_forms_of_the_issue_are_masked(redactor: Redactor) -> None:
    texts = {
        "call five two three two, nine eight five one, two two on the mobile": "five",
        "Card 2202·4665·2532·7107 on file": "2202·4665·2532·7107",
        "write to rezendeyasmin at naver dot com": "rezendeyasmin at naver dot com",
        "mail: j o h n . s m i t h @ g m a i l . c o m": "j o h n . s m i t h @ g m a i l . c o m",
        "from аnna@exаmple.com (Cyrillic а)": "аnna@exаmple.com",
        '{"name": "张英", "id": "450327199611181412"}': "450327199611181412",
        "RRN: 910411-1777631": "910411-1777631",
        "Aadhaar 2447 6996 0899": "2447 6996 0899",
        "Steuer-ID 41 368 970 506": "41 368 970 506",
        "cpf,nome\n39411573967,Ana": "39411573967",
        "key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY": "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "token glpat-Xy9zAb3dEf6gHi9jKl2m": "glpat-Xy9zAb3dEf6gHi9jKl2m",
        "?email=anna.weber%40example.com&x=1": "anna.weber%40example.com",
    }
    for text, value in texts.items():
        if value == "five":
            value = "five two three two, nine eight five one, two two"
        assert masked_whole(redactor, text, value), text
