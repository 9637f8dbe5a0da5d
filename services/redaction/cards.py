"""Payment card numbers by issuer range and Luhn check, written with or without separators.

Presidio's CreditCardRecognizer knows a handful of prefixes and missed current ranges (for
example Mastercard's 2-series). Here a card is any 12-19 digit run that starts inside a
published issuer range for its length and passes the Luhn check. Digits may be grouped
by single separators (none, space, dash, dot), in groups of three or more digits, and may
sit inside a longer token (`card:5555...`, `cc=4111...`): only neighbouring digits end a candidate.
A run of groups longer than a card (a card followed by a year, say) is searched for every
contiguous sub-run of groups that is a card.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from services.redaction.recognizers import finding
from shared.text.checksums import luhn_ok


@dataclass(frozen=True)
class IssuerRange:
    brand: str
    low: str   # inclusive prefix bounds of equal length
    high: str
    lengths: tuple[int, ...]

    def matches(self, digits: str) -> bool:
        if len(digits) not in self.lengths:
            return False
        return self.low <= digits[: len(self.low)] <= self.high


def _r(brand: str, low: str, high: str | None, lengths: range | tuple[int, ...]) -> IssuerRange:
    return IssuerRange(brand, low, high or low, tuple(lengths))


# Issuer identification ranges as the card networks publish them (IIN prefix, lengths).
ISSUER_RANGES: tuple[IssuerRange, ...] = (
    _r("visa", "4", None, (13, 16, 19)),
    _r("mastercard", "51", "55", (16,)),
    _r("mastercard", "2221", "2720", (16,)),
    _r("amex", "34", None, (15,)),
    _r("amex", "37", None, (15,)),
    _r("discover", "6011", None, range(16, 20)),
    _r("discover", "644", "649", range(16, 20)),
    _r("discover", "65", None, range(16, 20)),
    _r("discover", "622126", "622925", range(16, 20)),
    _r("jcb", "3528", "3589", range(16, 20)),
    _r("jcb", "3500", "3599", (16,)),  # the whole 35 block, as some issuers print it
    _r("jcb", "1800", None, (15,)),  # JCB's legacy 15-digit numbers
    _r("jcb", "2131", None, (15,)),
    _r("diners", "300", "305", range(14, 20)),
    _r("diners", "3095", None, range(14, 20)),
    _r("diners", "36", None, range(14, 20)),
    _r("diners", "38", "39", range(14, 20)),
    _r("unionpay", "62", None, range(16, 20)),
    _r("unionpay", "81", None, range(16, 20)),
    _r("maestro", "5018", None, range(12, 20)),
    _r("maestro", "5020", None, range(12, 20)),
    _r("maestro", "5038", None, range(12, 20)),
    _r("maestro", "5893", None, range(12, 20)),
    _r("maestro", "6304", None, range(12, 20)),
    _r("maestro", "0604", None, range(12, 20)),  # legacy UK Maestro (Switch), as Faker issues
    _r("maestro", "6759", None, range(12, 20)),
    _r("maestro", "6761", "6763", range(12, 20)),
    _r("maestro", "50", None, range(12, 20)),
    _r("maestro", "56", "69", range(12, 20)),
    _r("mir", "2200", "2204", range(16, 20)),
    _r("rupay", "60", None, range(16, 20)),
    _r("rupay", "65", None, range(16, 20)),
    _r("rupay", "81", "82", range(16, 20)),
    # Elo (Brazil): its published IIN ranges.
    *(_r("elo", low, high, (16,)) for low, high in (
        ("401178", "401179"), ("431274", None), ("438935", None), ("451416", None),
        ("457393", None), ("457631", "457632"), ("504175", None), ("506699", "506778"),
        ("509000", "509999"), ("627780", None), ("636297", None), ("636368", None),
        ("650031", "650033"), ("650035", "650051"), ("650405", "650439"),
        ("650485", "650538"), ("650541", "650598"), ("650700", "650718"),
        ("650720", "650727"), ("650901", "650978"), ("651652", "651679"),
        ("655000", "655019"), ("655021", "655058"))),
    _r("rupay", "508", None, range(16, 20)),
    _r("rupay", "353", None, (16,)),
    _r("rupay", "356", None, (16,)),
    _r("verve", "506099", "506198", range(16, 20)),
    _r("verve", "650002", "650027", range(16, 20)),
    _r("troy", "9792", None, (16,)),
)
MIN_DIGITS, MAX_DIGITS = 12, 19

# Digit groups joined by single separators; no digit on either side.
_RUN = re.compile(r"(?<!\d)\d+(?:[ .\-]\d+)*(?!\d)")
# Cards are printed in groups of 3 or more digits; only the last group may be shorter.
# (A run like "4 12 33 5 100" is a list of numbers, not a card.)
MIN_INNER_GROUP = 3


def brand_of(digits: str) -> str | None:
    """The brand whose published range holds this number (any length rule), else None."""
    if not (MIN_DIGITS <= len(digits) <= MAX_DIGITS and digits.isdigit()):
        return None
    for issuer in ISSUER_RANGES:
        if issuer.matches(digits):
            return issuer.brand
    return None


_HEX_TOKEN = re.compile(r"[0-9A-Fa-f]+")
MIN_HEX_ID = 32  # hex digests: MD5 32, git and SHA-1 40, SHA-256 64


def _in_hex(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is part of a hex digest (32 or more hex characters,
    letters beside the digits)."""
    glued = (start > 0 and text[start - 1] in "abcdefABCDEF") or (
        end < len(text) and text[end] in "abcdefABCDEF")
    if not glued:
        return False
    a = start
    while a > 0 and text[a - 1] in "0123456789abcdefABCDEF":
        a -= 1
    token = _HEX_TOKEN.match(text, a)
    return token is not None and token.end() >= end and token.end() - a >= MIN_HEX_ID and (
        token.end() == len(text) or not text[token.end()].isalnum()) and (
        a == 0 or not text[a - 1].isalnum())


def find_cards(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, brand) of every card number in `text`, longest first where they nest."""
    for run in _RUN.finditer(text):
        if _in_hex(text, run.start(), run.end()):
            continue  # digits of a commit id or digest ("2f5bee638948037574a60c43...")
        groups = [(m.start() + run.start(), m.end() + run.start())
                  for m in re.finditer(r"\d+", run.group())]
        yield from _cards_in_groups(text, groups)


def _cards_in_groups(text: str, groups: list[tuple[int, int]]) -> Iterator[tuple[int, int, str]]:
    """The longest card starting at each group, skipping groups inside a card found."""
    taken_until = -1
    for i, (start, _) in enumerate(groups):
        if start < taken_until:
            continue
        best, prev_short = None, False
        for g_start, end in groups[i:]:
            if g_start > start and prev_short:
                break
            prev_short = end - g_start < MIN_INNER_GROUP
            digits = re.sub(r"\D", "", text[start:end])
            if len(digits) > MAX_DIGITS:
                break
            brand = brand_of(digits)
            if brand is not None and luhn_ok(digits):
                best = (start, end, brand)
        if best is not None:
            taken_until = best[1]
            yield best


class CardRecognizer(LocalRecognizer):
    """CREDIT_CARD by issuer range and Luhn check (replaces Presidio's CreditCardRecognizer)."""

    SCORE = 0.95
    CONTEXT = ["card", "credit", "debit", "visa", "mastercard", "amex", "payment", "cc"]

    def __init__(self) -> None:
        super().__init__(supported_entities=["CREDIT_CARD"], supported_language="en",
                         context=self.CONTEXT, name="CardRecognizer")

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        return [finding(self, "CREDIT_CARD", start, end, self.SCORE, f"{brand} range, Luhn valid")
                for start, end, brand in find_cards(text)]
