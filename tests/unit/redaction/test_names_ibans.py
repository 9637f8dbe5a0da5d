"""Names the rules find and technology words they keep; IBANs by the mod-97 check."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.redaction.ibans import find_ibans, iban_ok
from services.redaction.names import NameRecognizer
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from tests.unit.redaction.pii_generated import TECH, generate

NAMES = NameRecognizer()


def people(text: str) -> list[str]:
    return [text[r.start:r.end] for r in NAMES.analyze(text, ["PERSON"])]


def test_greetings_signatures_honorifics_and_given_names() -> None:
    text = ("Hi Dörte,\nThe export was fixed by Customer Walentina Faust yesterday.\n"
            "Dr. Okonkwo approved it.\nBest regards,\nNoud van der Horst\n+31 20 123 4567")
    found = people(text)
    for name in ("Dörte", "Walentina Faust", "Okonkwo", "Noud van der Horst"):
        assert name in found, (name, found)


def test_technology_words_acronyms_and_closings_are_not_people() -> None:
    for text in TECH + ("The CI job failed.", "Cheers,\nKafka Connect\n", "Will Redis fail over?"):
        assert people(text) == [], text


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def test_ner_spans_are_trimmed_to_the_name_line(redactor: Redactor) -> None:
    out = redactor.redact_texts(["Best regards,\nTom Lloyd\n+44 161 496 0932"])[0].text
    assert out == "Best regards,\n<PERSON>\n<PHONE_NUMBER>"


def test_technical_prose_has_no_person(redactor: Redactor) -> None:
    texts = [" ".join(TECH[i:] + TECH[:i]) for i in range(len(TECH))]
    for out in redactor.redact_texts(texts):
        assert "PERSON" not in out.counts, out.text


def test_dev_slice_people_are_masked_whole(redactor: Redactor) -> None:
    docs = generate("dev", 60)
    found = redactor.analyze([d.text for d in docs])
    total = masked = 0
    for doc, results in zip(docs, found, strict=True):
        cover = {i for r in results for i in range(r.start, r.end)}
        for s in doc.spans:
            total += 1
            masked += all(i in cover for i in range(s.start, s.end))
    assert total > 300 and masked / total >= 0.98


def _iban(rng: random.Random, country: str, length: int) -> str:
    bban = "".join(rng.choice(string.digits + string.ascii_uppercase) for _ in range(length - 4))
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in moved)) % 97
    return f"{country}{check:02d}{bban}"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["DE", "GB", "ES", "FR", "NL", "IT", "IE", "PL", "SE", "XK"]),
       st.integers(15, 34), st.integers(0, 2**32), st.booleans(),
       st.sampled_from(["account ", "vendor's IBAN:", "(", "IBAN "]))
def test_any_valid_iban_compact_or_grouped_is_found(country, length, seed, grouped, lead):
    value = _iban(random.Random(seed), country, length)
    assert iban_ok(value)
    if grouped:
        value = " ".join(value[i:i + 4] for i in range(0, len(value), 4))
    text = f"{lead}{value} was paid."
    assert (len(lead), len(lead) + len(value)) in find_ibans(text)


def test_a_broken_check_is_not_an_iban() -> None:
    assert find_ibans("DE89 3704 0044 0532 0130 00") == [(0, 27)]
    assert find_ibans("DE88 3704 0044 0532 0130 00") == []
