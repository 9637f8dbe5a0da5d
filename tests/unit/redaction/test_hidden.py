"""Redaction reads what a reader sees: values hidden with invisible characters, look-alike
digits, odd spaces or table cells are masked over their whole original span, and text
without PII comes out unchanged however many such characters it holds.

Values come from Faker (seeds and locales drawn by hypothesis, none tuned on); the ways of
hiding are drawn per character (tests/unit/shared/test_visible.py holds the same forms)."""

from __future__ import annotations

import re

import pytest
from faker import Faker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripts.benchlib.pii_corpus import FILLER
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings
from shared.text.visible import reading_view
from tests.support.hiding import HIDDEN, ODD_SPACES, digit_forms

LOCALES = ["en_US", "de_DE", "fr_FR", "en_IN", "pt_BR", "nl_NL"]
SLOW = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def sprinkle(draw: st.DrawFn, text: str) -> str:
    """`text` with invisible characters drawn between its characters."""
    return "".join(ch + "".join(draw(st.lists(st.sampled_from(HIDDEN), max_size=1)))
                   for ch in text)


@st.composite
def hidden_card(draw: st.DrawFn) -> tuple[str, str]:
    fake = Faker(draw(st.sampled_from(LOCALES)))
    fake.seed_instance(draw(st.integers(0, 2**32)))
    digits = fake.credit_card_number(card_type=draw(st.sampled_from(
        ["visa16", "mastercard", "amex", "discover", "jcb16"])))
    sep = draw(st.sampled_from([" ", "-", " | ", "", *ODD_SPACES, "\u2011"]))
    out = []
    for i, ch in enumerate(digits):
        if i and i % 4 == 0:
            out.append(sep)
        out.append(draw(st.sampled_from(digit_forms(int(ch)))))
        out.append("".join(draw(st.lists(st.sampled_from(HIDDEN), max_size=2))))
    return digits, "".join(out)


@SLOW
@given(hidden_card(), st.sampled_from(["The payment with card {v} was declined twice.",
                                       "| customer | card |\n| --- | --- |\n| A | {v} |",
                                       "Refund to {v} issued after the outage."]))
def test_a_hidden_card_number_is_masked_whole(redactor: Redactor, card: tuple[str, str],
                                              template: str) -> None:
    digits, hidden = card
    (out,) = redactor.redact_texts([template.replace("{v}", hidden)])
    assert out.counts["CREDIT_CARD"] == 1, (digits, hidden, out.text)
    assert not re.search(r"\d", reading_view(out.text).text), out.text


@SLOW
@given(st.data(), st.sampled_from(["de_DE", "fr_FR", "nl_NL", "es_ES", "it_IT", "en_GB"]),
       st.integers(0, 2**32))
def test_a_hidden_iban_is_masked(redactor: Redactor, data: st.DataObject, locale: str,
                                 seed: int) -> None:
    fake = Faker(locale)
    fake.seed_instance(seed)
    iban = fake.iban()
    grouped = " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
    hidden = sprinkle(data.draw, data.draw(st.sampled_from([iban, grouped])))
    (out,) = redactor.redact_texts([f"Wire the settlement to account {hidden} by Friday."])
    assert "<IBAN_CODE>" in out.text, (iban, out.text)
    assert not re.search(r"\d", reading_view(out.text).text), out.text


@SLOW
@given(st.data(), st.sampled_from(LOCALES), st.integers(0, 2**32),
       st.sampled_from(["\uff20", "\ufe6b", "@"]))
def test_a_hidden_email_is_masked(redactor: Redactor, data: st.DataObject, locale: str,
                                  seed: int, at: str) -> None:
    fake = Faker(locale)
    fake.seed_instance(seed)
    local, domain = fake.ascii_email().split("@")
    hidden = sprinkle(data.draw, local) + at + sprinkle(data.draw, domain)
    (out,) = redactor.redact_texts([f"The customer wrote from {hidden} twice this week."])
    assert "<EMAIL_ADDRESS>" in out.text, (local, domain, out.text)
    assert local not in reading_view(out.text).text


@SLOW
@given(st.data(), st.sampled_from(FILLER))
def test_text_without_pii_is_unchanged_whatever_it_hides(redactor: Redactor,
                                                         data: st.DataObject,
                                                         sentence: str) -> None:
    (plain,) = redactor.redact_texts([sentence])
    if plain.text != sentence:  # a false positive of the analyzer, not this property's
        return
    hidden = sprinkle(data.draw, sentence)
    (out,) = redactor.redact_texts([hidden])
    assert out.text == hidden and not out.counts


def test_the_values_of_the_issue_are_masked(redactor: Redactor) -> None:
    texts = [
        "card 4111\u200b1111\u200b1111\u200b1111 on file",
        "card 4\u00ad111 1111 1111 1111 on file",
        "card \u200e4111 1111\u200f 1111 1111 on file",
        "card 4111\u20091111\u20091111\u20091111 on file",
        "card 4\u0332111 1\u0332111 1111 1111 on file",
        "card \U0001d7d2\U0001d7cf\U0001d7cf\U0001d7cf 1111 1111 1111 on file",
        "| name | card |\n|---|---|\n| x | 4111 | 1111 | 1111 | 1111 |",
        "IBAN DE89\u200b3704\u200b0044\u200b0532\u200b0130\u200b00 on file",
    ]
    for out in redactor.redact_texts(texts):
        assert not re.search(r"\d{2}", reading_view(out.text).text), out.text
    (mail,) = redactor.redact_texts(["write to anna.weber\uff20example.com today"])
    assert mail.text == "write to <EMAIL_ADDRESS> today"
