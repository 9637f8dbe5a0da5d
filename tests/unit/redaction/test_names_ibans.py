"""Names the rules find and technology words they keep; IBANs by the mod-97 check."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scripts.benchlib.pii_generated import TECH, generate
from services.redaction.ibans import find_ibans, iban_ok
from services.redaction.names import NameRecognizer
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings

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


SCIENCE = (
    "Activin signalling and Chordin degradation were measured by Western blot.",
    "Caspases cleave Condensin in mitosis; Dvl dosage was raised in Xenopus embryos.",
    "We used a Markov chain Monte Carlo sampler and Bonferroni correction (P < 0.01).",
    "Embase and the Cochrane Library were searched; Cox models gave hazard ratios.",
    "Patients from the San Francisco Men's Health Study were enrolled at General Hospital.",
    "The optimum concentration was 1.0 M. Transformation efficiency increased fivefold.",
    "Fructosamine predicts glycaemia. Nivolumab binds PD-1, and Treg cells were counted.",
    "Funding came from the Melinda Gates Foundation; scores used the Hamilton Rating Scale.",
)


def test_technical_prose_with_capitalised_terms_has_no_person(redactor: Redactor) -> None:
    for text, out in zip(SCIENCE, redactor.redact_texts(list(SCIENCE)), strict=True):
        assert "PERSON" not in out.counts, (text, out.text)


@pytest.mark.parametrize("text, names", [
    # named in full once, then by surname alone
    ("The pager went to Onkar Jaggi; Jaggi acknowledged it.", ["Onkar Jaggi", "Jaggi"]),
    # introduced by the words around them, first names the gazetteer may not know
    ("Thanks to Yashica for the quick fix.", ["Yashica"]),
    ("Escalated to Qadim Swamy; callback requested.", ["Qadim Swamy"]),
    ("Customer Netra Shukla reported duplicate charges.", ["Netra Shukla"]),
    ("Wazir Baral rolled back the deploy.", ["Wazir Baral"]),
    ("Megan's laptop was re-imaged.", ["Megan"]),
    ("Ticket from Darragh Ó Fearraidhe about the invoice.", ["Darragh Ó Fearraidhe"]),
    # the surname also in an address: a part of an address is no lower-case word
    ("Escalation from Jennifer Lawrence (jennifer.lawrence@example.com).",
     ["Jennifer Lawrence"]),
])
def test_people_named_alone_or_introduced(redactor: Redactor, text: str,
                                          names: list[str]) -> None:
    out = redactor.redact_texts([text])[0].text
    for name in names:
        assert name not in out, (text, out)
    assert out.count("<PERSON>") >= len(names), out


def test_a_word_used_in_lower_case_is_no_surname() -> None:
    assert people("Ask Gene Content about the content of the export.") == []
