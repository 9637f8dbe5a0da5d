"""Amounts, ISBNs and versions are never phones or IP addresses; real ones still are."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scripts.benchlib.pii_ordinary import KINDS
from services.redaction.phones import PossiblePhoneRecognizer
from services.redaction.recognizers import AddressRecognizer
from services.redaction.redactor import Redactor
from services.redaction.settings import PHONE_REGIONS, RedactionSettings
from shared.text.ordinary import amount, publication_number, version
from shared.text.reader import normalised_view

PHONES = PossiblePhoneRecognizer(list(PHONE_REGIONS))
ADDRESSES = AddressRecognizer()


def _phones(text: str) -> list[str]:
    return [text[r.start:r.end] for r in PHONES.analyze(text, ["PHONE_NUMBER"])]


def _addresses(text: str) -> list[str]:
    return [text[r.start:r.end] for r in ADDRESSES.analyze(text, ["IP_ADDRESS"])]


@pytest.mark.parametrize("text", [
    "The invoice total was Rp 5.537.000 for the quarter.",
    "We paid 4.416.000 ₫ to the supplier.", "Worth € 1.234.567,89 in total.",
    "The fee is R$ 2.500,00 a month.", "The budget is 1 234 567 zł this year.",
    "Price CHF 1'234'567.50 net.", "Total 12 345 678 Kč due.", "Paid IDR 15.000.000 today.",
])
def test_amounts_are_no_phones(text: str) -> None:
    assert _phones(text) == []


@pytest.mark.parametrize("text", [
    "See ISBN 978-1-6169-6859-5 for details.", "The book 9781616968595 is on the shelf.",
    "ISBN-13: 978 1 6169 6859 5", "Journal ISSN 0378-5955 vol. 3",
])
def test_publication_numbers_are_no_phones(text: str) -> None:
    assert _phones(text) == []


@pytest.mark.parametrize("text", [
    "Upgrade to firmware 9.14.67.234 today.", "Deployed build 2.7.1.44 yesterday.",
    "Version: 10.0.1.20 is out.", "Release v 1.2.3.4 fixes it.",
])
def test_versions_are_no_addresses(text: str) -> None:
    assert _addresses(text) == []


@pytest.mark.parametrize(("text", "value"), [
    ("Connect to host 10.1.2.3 for the demo.", "10.1.2.3"),
    ("server 192.168.1.20 is down", "192.168.1.20"),
    ("client ip 172.16.4.9 blocked", "172.16.4.9"),
])
def test_addresses_without_a_version_word_stay(text: str, value: str) -> None:
    assert _addresses(text) == [value]


@pytest.mark.parametrize(("text", "value"), [
    ("Paid $ 120, call +44 20 7946 0958 about it.", "+44 20 7946 0958"),
    ("€ +49 30 901820 is the desk", "+49 30 901820"),
    ("Call 020 7946 0958 tomorrow.", "020 7946 0958"),
])
def test_phones_beside_money_words_stay(text: str, value: str) -> None:
    assert value in _phones(text)


def test_a_bare_13_digit_number_is_spared_only_when_its_isbn_check_holds() -> None:
    assert publication_number("9781616968595", "The book ")
    assert not publication_number("9781616968596", "The book ")
    assert not publication_number("+9781616968595", "call ")


@given(st.integers(0, 10_000))
def test_generated_amounts_read_as_amounts(seed: int) -> None:
    token = KINDS["amount"](random.Random(seed))
    digits = [i for i, c in enumerate(token) if c.isdigit()]
    a, b = digits[0], digits[-1] + 1
    assert amount(token[a:b], token[:a], token[b:]), token


@given(st.integers(0, 10_000))
def test_generated_versions_follow_a_version_word(seed: int) -> None:
    token = KINDS["version"](random.Random(seed))
    at = next(i for i, c in enumerate(token) if c.isdigit())
    assert version(token[:at]), token


def test_a_phone_prefix_is_never_an_amount() -> None:
    assert not amount("+44 20 7946 0958", "€ ", "")
    assert not amount("020 7946 0958", "EUR ", "")
    assert not amount("5.537.000", "host ", " today")


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


@pytest.mark.parametrize("text", [
    "The invoice total was Rp 5.537.000 for the quarter.", "We paid 4.416.000 ₫ last week.",
    "Refund of IDR\u00a05.085.600.422 was issued after review.",
    "See ISBN 978-1-6169-6859-5 for details.", "Upgrade to firmware 9.14.67.234 today.",
    "| Tier | Price |\n|---|---|\n| Bronze | 120 |\n| North | 80 |",
    "| Item | Firmware 6694.151.159.156 |\n|---|---|",
    "segment,revenue\nSouth,1200\nGold,800\n",
])
def test_ordinary_business_text_comes_out_as_it_went_in(redactor: Redactor, text: str) -> None:
    assert redactor.redact_texts([text])[0].text == text


def test_real_phones_and_addresses_beside_them_are_still_masked(redactor: Redactor) -> None:
    text = ("Paid € 1.234,50; host 10.1.2.3 runs firmware 9.14.67.234; "
            "call +44 20 7946 0958 about ISBN 978-1-6169-6859-5.")
    assert redactor.redact_texts([text])[0].text == (
        "Paid € 1.234,50; host <IP_ADDRESS> runs firmware 9.14.67.234; "
        "call <PHONE_NUMBER> about ISBN 978-1-6169-6859-5.")


@pytest.mark.parametrize("text", [
    "Refund of IDR 5.085.600.422 was issued.", "Price THB 2 099 294 436 net",
    "Price 4\u00a0038\u00a0350\u00a0137 VND net", "BIOS 229.10.16.2597 installed",
])
def test_an_amounts_or_versions_groups_are_not_read_as_a_values_pieces(text: str) -> None:
    assert normalised_view(text).text == text.replace("\u00a0", " ")


def test_a_phones_pieces_are_still_read_as_one() -> None:
    assert normalised_view("Tel: 0141.0819.25").text == "Tel: 0141081925"
