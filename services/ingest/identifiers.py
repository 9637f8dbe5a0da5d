"""Personal data in the fields redaction never analyses: ids, source, domain, metadata keys,
CDC database and table names, the API source header.

Those fields name a document everywhere downstream (topic keys, audit leaves, stream
statistics, status files, index shards), so they are not redacted but refused: a record
with an e-mail address, a payment card number, an IBAN, a US social security number, a
phone number, or a national number (CPF, CNPJ, Aadhaar, PRC resident id, Korean RRN,
Steuer-ID, Russian passport, and the person ids of shared.text.id_catalogue: a CURP, a
NIR, a `pesel-...`) in one of them is dead-lettered
`pii_in_identifier` with the field's name, never its value. Checked on the normalised view
redaction reads (shared.text.reader: percent-decoded, NFKC, every script's digits,
look-alike letters, hidden characters removed), and on what a base64 or hex part of it
decodes to, so `...-anna%40example.com`, a fullwidth `９７１-５６-...` or a base64 e-mail
do not get a value through. Names cannot be told from ordinary words without an NER
model: an id made of a person's name passes (docs/design/topic-contract.md says so).

The checks are exact patterns with check digits where the value has them (Luhn for cards,
ISO 7064 mod 97 for IBANs, the national numbers' own), so ordinary ids (`INC-2026-0042`,
`kb/123`, numeric keys, UUIDs, dates, numeric keys of up to 11 digits) pass: digits are a
card only when some contiguous groups of one run (`-`, `.` or space between groups) make
12-19 digits that pass Luhn with a length an issuing network issues for its leading
digits; a phone when written with its international `+` prefix, or in three or more groups
that make a valid number with a country code first (`971-56-767-6200`) or a trunk prefix
(`030-1234-5678`); a national number in its printed form or named (`cpf-...`). A 12-19
digit key that is a valid card number is refused: nothing tells it from one.
"""

from __future__ import annotations

import re

import phonenumbers

from shared.errors import InvalidInput
from shared.text.checksums import IBAN_CANDIDATE, iban_ok, luhn_ok
from shared.text.encoded import payloads
from shared.text.national_ids import national_ids
from shared.text.reader import normalised_view

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}")
_DIGIT_RUN = re.compile(r"\d+(?:[ .-]\d+)*")
_HEX_ID = re.compile(r"(?i)(?<![0-9a-z])(?:[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"
                     r"|[0-9a-f]{32,})(?![0-9a-z])")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_PHONE = re.compile(r"\+\d(?:[ .()-]{0,2}\d){7,14}(?!\d)")
# Digits in three or more groups, the first of one to three digits: a phone written
# without its `+` or with a trunk prefix, when the digits make a valid number.
_GROUPED_PHONE = re.compile(r"(?<![\d.])\d{1,4}(?:[ ._-]\d{1,4}){2,5}(?![\d.])")
_ISO_DATE = re.compile(r"(?:19|20)\d\d[-_.](?:0[1-9]|1[0-2])[-_.](?:0[1-9]|[12]\d|3[01])")
# Where a national-format number is read (the served locales').
PHONE_REGIONS = ("US", "GB", "DE", "IN", "BR", "CN", "JP", "KR", "RU", "SA", "AE", "EG", "FR")
# Issuer ranges by leading digits and the lengths they issue (redaction's cards.py holds
# the networks' full table; this coarser one finds a superset of its cards).
_CARD_LENGTHS = (
    (re.compile(r"4"), (13, 16, 19)),
    (re.compile(r"5[06-9]|6|0604"), tuple(range(12, 20))),  # Maestro, Discover, UnionPay
    (re.compile(r"5[1-5]|2[2-7]"), (16,)),
    (re.compile(r"3[47]|1800|2131"), (15,)),
    (re.compile(r"3[0689]|35|81|9792"), tuple(range(14, 20))),
)


def _cards(text: str) -> bool:
    """A 12-19 digit card in some contiguous groups of a digit run (`4111-1111-...`,
    `cc4111111111111111`, a card between an order number and a year)."""
    for run in _DIGIT_RUN.finditer(text):
        groups = re.findall(r"\d+", run.group())
        for i in range(len(groups)):
            digits = ""
            for group in groups[i:]:
                digits += group
                if len(digits) > 19:
                    break
                if _card_shaped(digits) and luhn_ok(digits):
                    return True
    return False


def _card_shaped(digits: str) -> bool:
    return any(prefix.match(digits) and len(digits) in lengths
               for prefix, lengths in _CARD_LENGTHS)


def _grouped_phone(text: str) -> bool:
    for m in _GROUPED_PHONE.finditer(text):
        if _ISO_DATE.search(m.group()):
            continue
        digits = re.sub(r"\D", "", m.group())
        if not 10 <= len(digits) <= 15:
            continue
        first = re.match(r"\d+", m.group())
        assert first is not None
        if len(first.group()) <= 3 and not digits.startswith("0") and _valid("+" + digits):
            return True
        if digits.startswith("0") and not digits.startswith("00") and any(
                _valid(digits, region) for region in PHONE_REGIONS):
            return True
    return False


def _valid(number: str, region: str | None = None) -> bool:
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(number, region))
    except phonenumbers.NumberParseException:
        return False


def pii_kind(value: str) -> str | None:
    """The kind of personal data `value` holds ('EMAIL_ADDRESS', ...), or None."""
    text = normalised_view(value).text
    kind = _kind_in(text)
    if kind is None:
        for _, _, decoded in payloads(text):  # base64 or hex of text
            kind = _kind_in(normalised_view(decoded).text)
            if kind is not None:
                break
    return kind


def _kind_in(text: str) -> str | None:
    # UUIDs and long hex digests are identifiers by shape: their digit groups are no card.
    text = _HEX_ID.sub(" ", text)
    if "@" in text and _EMAIL.search(text):
        return "EMAIL_ADDRESS"
    if _SSN.search(text):
        return "US_SSN"
    if _PHONE.search(text) or _grouped_phone(text):
        return "PHONE_NUMBER"
    if any(iban_ok(m.group()) for m in IBAN_CANDIDATE.finditer(text.upper())):
        return "IBAN_CODE"
    if _cards(text):
        return "CREDIT_CARD"
    for _, _, entity in national_ids(text):
        return entity
    return None


def check_identifier(value: str, field: str) -> str:
    """`value` unchanged, or InvalidInput(pii_in_identifier) naming the field and the kind."""
    kind = pii_kind(value)
    if kind is not None:
        raise InvalidInput("pii_in_identifier", field, f"{kind} in an identifier field")
    return value
