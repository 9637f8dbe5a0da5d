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


def find_cards(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, brand) of every card number in `text`, longest first where they nest."""
    for run in _RUN.finditer(text):
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
