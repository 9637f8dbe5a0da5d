"""Tokens of business text that are never phones, ids or IP addresses: amounts, ISBNs and
ISSNs, and version numbers.

Each rule says what the token *is*, not which examples it must spare:

- An amount is digits with a currency beside them: a currency sign (any character of
  Unicode's currency-symbol category, so ₫ ₺ ₪ ฿ ₹ and R$ with it), an ISO 4217 code in
  capitals, or a local abbreviation printed in place of a sign (Rp, zł, Kč, kr, Ft, lei,
  TL, руб, грн ...), before or after with at most spaces between, and any thousands
  separator (dot, comma, space, no-break space, apostrophe). A number with a `+` or a
  trunk prefix (0 then eight more digits) is not an amount: a phone written beside a
  price stays a phone.
- An ISBN or ISSN is a number after the word ISBN/ISSN (the label names it), or a bare
  ISBN-13: 978 or 979 then ten digits whose EAN check digit holds (1 in 10 of random
  13-digit numbers from 978 pass, none of them with a `+`: 978 and 979 are no country's
  calling code a number is written with). A bare ISSN is not spared: its 4-4 layout is
  a phone's in Hong Kong or Singapore, and 1 in 11 of those would pass its check.
- A version is a dotted number right after a word that names one (firmware, version, v,
  build, release, revision, patch, kernel, BIOS, driver, SDK); "host 10.1.2.3" or
  "server 10.1.2.3" has no such word and stays an address.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from stdnum import isbn

# ISO 4217's active codes, less those that are English words written in capitals (ALL,
# CUP, MAD, PEN, BOB, GEL, MOP, SOS, TOP): "CALL SOS 020 7946 0958" is a phone.
ISO_4217 = (
    "AED", "AFN", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN",
    "BHD", "BIF", "BMD", "BND", "BOV", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF",
    "CHF", "CLP", "CNY", "COP", "CRC", "CUC", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD", "EGP",
    "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD",
    "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD", "JOD", "JPY", "KES",
    "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD", "LSL",
    "LYD", "MDL", "MGA", "MKD", "MMK", "MNT", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN",
    "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PGK", "PHP", "PKR", "PLN", "PYG",
    "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE",
    "SLL", "SRD", "SSP", "STN", "SVC", "SYP", "SZL", "THB", "TJS", "TMT", "TND", "TRY", "TTD",
    "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS", "VES", "VND", "VUV", "WST", "XAF", "XCD",
    "XOF", "XPF", "YER", "ZAR", "ZMW", "ZWG", "ZWL", "RMB", "NIS",
)
# Abbreviations printed where a sign would be, matched in any case.
_LOCAL = (r"rp|zł|zl|kč|kc|kr|ft|lei|tl|rs\.?|руб\.?|р\.|грн|лв|ден|сом|тг|đ|บาท|元|円|원|"
          r"ريال|درهم|ج\.م|ש\"ח|lek|kn|dh")
# The Basic Multilingual Plane holds every sign in use (the two outside are historic).
_SIGNS = "".join(re.escape(chr(c)) for c in range(0x10000)
                 if unicodedata.category(chr(c)) == "Sc")
_CODES = "|".join(ISO_4217)
_SPACE = r"[ \t\u00a0\u202f\u2009]*"
_CURRENCY_BEFORE = re.compile(
    rf"(?:[{_SIGNS}]|(?<![^\W\d_])(?:{_CODES}|(?i:{_LOCAL}))){_SPACE}$")
_CURRENCY_AFTER = re.compile(
    rf"^{_SPACE}(?:[{_SIGNS}]|(?:{_CODES}|(?i:{_LOCAL}))(?![^\W\d_]))")
_TRUNK = re.compile(r"^0\d(?:\D?\d){7,}")

_DOTTED_TAIL = re.compile(r"(?:\d+\.)+$")
_PUBLICATION_CUE = re.compile(r"(?i)\b[ep]?(?:isbn|issn)(?:[- ]?1[03])?[ \t]*[:#]?[ \t]*$")
_EAN_BOOK = re.compile(r"^97[89]\d{10}$")

_VERSION_CUE = re.compile(
    r"(?i)(?:\b(?:firmware|fw|version|ver|build|release|rel|revision|rev|patch|kernel|bios|"
    r"driver|sdk)\b\.?[ \t]*[:#=]?[ \t]*v?|(?<![^\W\d_])v\.?[ \t]?)$")


def amount(raw: str, before: str, after: str) -> bool:
    """Whether `raw`, with `before` and `after` the text around it, is an amount."""
    body = raw.strip()
    if body.startswith("+") or _TRUNK.match(body):
        return False
    return bool(_CURRENCY_BEFORE.search(before[-12:]) or _CURRENCY_AFTER.match(after[:12]))


def publication_number(raw: str, before: str) -> bool:
    """Whether `raw` is an ISBN or ISSN: named so by the word before it, or a checksummed
    ISBN-13 from 978/979 without a `+`."""
    if raw.lstrip().startswith("+"):
        return False
    if _PUBLICATION_CUE.search(before[-16:]):
        return True
    digits = re.sub(r"[\s.-]", "", raw)
    return bool(_EAN_BOOK.match(digits)) and isbn.is_valid(digits)


def version(before: str) -> bool:
    """Whether a number right after `before` is (part of) a version: a word naming one ends
    `before` ("firmware ", "version: ", "v"), the version's earlier parts aside
    ("firmware 144." before "207.7396")."""
    return bool(_VERSION_CUE.search(_DOTTED_TAIL.sub("", before[-48:])))


# Digits in thousands (Indian lakhs too) with any separator, or none, and a decimal part.
_NUM = (r"(?:\d{1,3}(?:[.,'\u00a0\u202f ]\d{3})+|\d{1,2}(?:,\d\d)+,\d{3}|\d+)"
        r"(?:[.,]\d{1,2})?(?!\d)")
# Whole tokens: an amount with its currency, a labelled or checksummed ISBN/ISSN, a version
# with its word. A finding wholly inside one of their numbers is dropped
# (services.redaction.spared), and the normalised view joins no pieces across one.
_TOKENS = re.compile(
    rf"(?P<pre>(?:[{_SIGNS}]|(?<![^\W\d_])(?:{_CODES}|(?i:{_LOCAL}))){_SPACE})(?P<a>{_NUM})"
    rf"|(?<![\d+])(?P<b>{_NUM})(?={_SPACE}(?:[{_SIGNS}]|(?:{_CODES}|(?i:{_LOCAL}))"
    r"(?![^\W\d_])))"
    r"|(?i:\b[ep]?-?(?:isbn|issn)(?:[- ]?1[03])?[ \t]*[:#]?[ \t]*)(?P<c>[\dX](?:[ -]?[\dX])+)"
    r"|(?<![\d+.-])(?P<d>97[89](?:[ -]?\d){10})(?![\d-])"
    r"|(?P<e>(?<![\d.])\d+(?:\.\d+)+)")


@lru_cache(maxsize=64)
def ordinary_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Spans of `text` whose digits are an amount's, an ISBN's or ISSN's, or a version's
    (cached: the normalised view and the redactor ask of the same text)."""
    if not any(c.isdigit() for c in text):
        return ()
    out = []
    for m in _TOKENS.finditer(text):
        group = next(g for g in "abcde" if m.group(g) is not None)
        a, b = m.span(group)
        raw = m.group(group)
        if group in "ab" and _TRUNK.match(raw):
            continue
        if group == "d" and not isbn.is_valid(re.sub(r"[ -]", "", raw)):
            continue
        if group == "e" and not version(text[max(0, a - 48):a]):
            continue
        out.append((a, b))
    return tuple(out)
