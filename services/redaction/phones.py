"""Phone numbers: every number that is *possible* in a configured region, not only *valid*.

Presidio's PhoneRecognizer keeps only numbers python-phonenumbers calls valid, that is
inside a currently assigned range; a fictional or test number (an unassigned area code,
555 exchanges) is still personal data in a ticket and was let through. Here a number that
is merely possible (right length for its region) is taken too, but only when it is
written the way phone numbers are written, so that ports, ticket ids, versions, dates and
IP addresses stay: it starts with `+` (E.164) or a trunk prefix, has a parenthesised area
code, is written in three or more digit groups or as a 7-digit local number, stands alone
on its line (a signature), follows a word like "phone" or "callback", or is offered as the
alternative to an e-mail address ("anna@example.com or 56520319"). A valid number is
taken in any of those shapes, and written as bare digits only after a cue, alone on its
line, with a trunk prefix or in the shape of a served locale's mobile numbers: digits alone
are as often an order or PO number. No number is taken that reads as a record's: a date or
time stamp, digits glued to an id's letters (ORD-2026-595105, build 20261210.3), a number
named as an order's, invoice's, ticket's or build's, an amount, an ISBN, a time of day's
digits (shared.text.ordinary says what an amount and an ISBN are).
Extensions ("x42", "ext. 123") are part of a match.

phonenumbers' matcher is the cost; it runs only on snippets around digit chains (a chain
is digit blocks joined by at most four punctuation characters, a superset of what the
matcher can find), with context around each so the results equal a whole-text run, and
per snippet only for the regions where a number as long as its longest chain is possible
at all: a match's national number never has more digits than the chain it lies in, so a
region whose shortest possible number is longer cannot match there (most of a scientific
abstract's chains are years and counts of 4-5 digits, possible in 3 and 9 of the 22 regions
that were the default then; profiled on 100 SciFact abstracts, the recognizer's share of
redaction's time fell from about 28% to 14-20%). Regions that parse every number alike
(CA beside US) run once, and the VALID-leniency pass runs only where a POSSIBLE match is
not valid whole, since it finds the same matches otherwise: with the served locales'
eight regions added, the recognizer costs about what the 22 did.
"""

from __future__ import annotations

import re
from functools import lru_cache

import phonenumbers
from phonenumbers import Leniency, PhoneMetadata
from phonenumbers.phonenumbermatcher import _verify as _matcher_verify
from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from services.redaction.recognizers import finding
from shared.text.ordinary import amount, publication_number
from shared.text.reader import BARE_MOBILE, PHONE_WORD
from shared.text.scripts import CJK

# A superset of phonenumbers' separators: non-word characters, 'x' and the katakana dash.
_CHAIN = re.compile(r"\d(?:[\W_x\u30fc]{0,4}\d)*")
# Context kept around a chain: phonenumbers looks at neighbouring characters (letters,
# a leading '+' or '('), and an extension ("ext. 123") is a chain of its own nearby.
MARGIN = 32
MIN_DIGITS = 4  # no region has a valid number this short
MIN_POSSIBLE_DIGITS = 7  # a merely possible number needs at least this many digits
# A word that announces a phone number, close before it ("callback requested on ...").
CUE = re.compile(r"(?i)\b(?:phone|tel|telephone|mobile|mob|cell|cellphone|call|called|calling|"
                 r"callback|ring|fax|sms|text|whatsapp|signal|contact|reach|dial|hotline|"
                 r"number|no|nr|ph|tél|telefon|handy|portable|celular|telefone|whats|"
                 r"msisdn|телефон\w*|тел|моб\w*|номер|电话|手机|電話|携帯|전화|휴대폰|फ़ोन|फोन|मोबाइल|"
                 r"هاتف|جوال|"
                 # "call" in the served languages: a number noted during a call
                 r"anruf|ligação|ligacao|llamada|appel|звонк\w*|कॉल|مكالمة|通话|通話|통화|"
                 rf"{PHONE_WORD})"
                 r"(?:\b|(?<=\W))[\w ]{0,20}\W{0,5}$")
# A number of an order, ticket, build, invoice ...: "PO number 4500123456", "build 20261210.3"
# ("number" alone is a phone cue, "order number" is not).
BUSINESS = re.compile(
    r"(?i)\b(?:order|ord|po|purchase order|invoice|inv|ticket|case|build|version|ver|release|"
    r"rev|revision|sku|serial|tracking|ref|reference|batch|lot|transaction|txn|tx|"
    r"confirmation|booking|receipt|job|run|pipeline|issue|pr|commit|port|item|part|model|"
    r"shipment|parcel|awb|container|record|row|step|epoch|timestamp|ts|unix|seq|sequence|"
    r"offset|partition|pid|uid|gid|id|pedido|nota|rechnung|bestellung|auftrag|заказ|счёт|"
    r"订单|注文|주문)\b[ \t]*(?:number|no\.?|nr\.?|num|#|id|nummer|número|номер)?"
    r"[ \t]*[:#=]?[ \t]*$"
    # Russian puts the number first: "номер заказа: 4500123456"
    r"|(?i:номер)[ \t]+(?i:заказа|сч[её]та|накладной|версии|сборки|тикета|заявки|партии|"
    r"строки|задачи)[ \t]*[:#=№]?[ \t]*$")
# Letters glued to the number by a dash, slash or underscore: an id (ORD-2026-595105).
_ID_PREFIX = re.compile(r"(?<![\w+])[A-Za-z][A-Za-z0-9]{0,15}[-_/#]$")
# A decimal's or an id's continuation: "12,50", "v1.2", "-rc"; not a CSV row's next field
# (",2026-07-25", ",4111...").
_ID_SUFFIX = re.compile(r"^(?:[-_/][A-Za-z]|[.,]\d{1,3}(?![\d-])|[A-Za-z])")
# Scripts written without spaces between words: Han, kana, Hangul, Thai, Lao, Khmer,
# Myanmar.
_UNSPACED = re.compile(rf"[{CJK}\uf900-\ufaff\u0e00-\u0eff\u1780-\u17ff\u1000-\u109f]")
# An area code in brackets with more digits after it: "(415) 555-0199".
_AREA_IN_BRACKETS = re.compile(r"\(\d{1,5}\)[ \t.-]*\d")
# Digits inside a time of day ("22:04:05.666+05:30").
_IN_TIME = re.compile(r"\d:$")
# Dates and times written as digits: 20261210, 2026-02-25T09:14, 1735689600 (Unix seconds).
_COMPACT_DATE = re.compile(r"^(?:19|20)\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
                           r"(?:[T ]?\d{2,6})?$")
_UNIX_TIME = re.compile(r"^1\d{9}(?:\d{3})?$")
# A header cell naming a phone column (CSV, TSV, Markdown table).
PHONE_COLUMN = re.compile(
    r"(?im)(?:^|[,|;\t])[ \t]*[\"']?(?:phone|tel|telephone|mobile|cell|msisdn|fax|whatsapp|"
    r"telefone|celular|telefon|handy|телефон|电话|手机|電話|携帯|전화|휴대폰|फ़ोन|फोन|هاتف|جوال)"
    r"[\w ]{0,16}[\"']?[ \t]*(?=[,|;\t]|$)")
# "... at anna@example.com or 56520319": a number offered as the alternative to an address.
AFTER_ADDRESS = re.compile(r"\S@\S+\s+(?:or|/|,)\s*$")
CUE_WINDOW = 40
# A word naming a phone right after the number, in the same clause: "назвал 83017404784 как
# номер телефона", "gave 4155550142 as their phone number".
CUE_AFTER = re.compile(rf"[ \t]*[^\W\d]{{0,12}}[ \t]+(?:[^\W\d]+[ \t]+){{0,2}}?(?i:{PHONE_WORD})")
LOCAL_SHAPE = re.compile(r"^\d{3}[ .-]\d{4}$")  # a 7-digit local number: 555-0142
_DATE = re.compile(r"^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4})$")
_SSN = re.compile(r"^\d{3}-\d{2}-\d{4}$")  # a US social security number's layout
_DOTTED_QUAD = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
# An IPv4 address (or any dotted quad) inside a text: its digits can run into a phone
# number beside it, making one match that prose rules then drop whole.
_ADDRESS = re.compile(r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.]*\d)")
_TRUNK = re.compile(r"^(?:0[1-9]|00[1-9])(?:[ ./-]?\d){7,}$")
# Numbers in prose that phone matchers take for numbers: decimals and ranges of them
# ("0.55-0.92", "3879.74", "1.6 - 88.1") and year ranges ("1977-2007").
_DECIMAL = re.compile(r"\d\.\d{1,2}(?!\d)|\d[.,]\d+\s*[-–]|[-–]\s*\d+[.,]\d")
_YEARS = re.compile(r"^\(?(?:1[89]|20)\d\d\s*[-–/]\s*(?:1[89]|20)?\d\d\)?$")
_GROUP = re.compile(r"\d+")
# The start of an extension label phonenumbers reads after a number (its explicit and
# ambiguous labels with letters, any case).
_EXTENSION_AFTER = re.compile(r"[\W_]{0,4}(?:e?xt|ｅ?ｘｔ|xｔ|доб|anexo|int|ｉｎｔ)", re.IGNORECASE)


def snippets(text: str) -> list[tuple[int, int]]:
    """Merged (start, end) spans of text around every digit chain that could be a number."""
    return [(start, end) for start, end, _ in digit_snippets(text)]


def digit_snippets(text: str) -> list[tuple[int, int, int]]:
    """`snippets`, each with a bound on the digits a number found in it can have: its
    longest chain's digits, with every 'x' counted as one (phonenumbers reads a number
    with three letters as a vanity number, x = 9), and no bound at all when an extension
    label follows a chain ("... 000 ext"), whose letters can become digits the same way."""
    out: list[tuple[int, int, int]] = []
    for m in _CHAIN.finditer(text):
        if sum(c.isdigit() for c in m.group()) < MIN_DIGITS:
            continue
        digits = sum(c.isdigit() or c in "xXｘＸ" for c in m.group())
        if _EXTENSION_AFTER.match(text, m.end()):
            digits = len(text)
        start, end = max(0, m.start() - MARGIN), min(len(text), m.end() + MARGIN)
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], end, max(out[-1][2], digits))
        else:
            out.append((start, end, digits))
    return out


def _valid_whole(match: phonenumbers.PhoneNumberMatch, region: str) -> bool:
    """Whether the matcher at VALID leniency accepts this POSSIBLE match whole. With a `+`
    and no `x`, that is the number's validity alone, whatever the region."""
    if not phonenumbers.is_valid_number(match.number):
        return False
    raw = match.raw_string
    return (raw.startswith("+") and "x" not in raw.lower()) or _verified(raw, region)


@lru_cache(maxsize=4096)
def _verified(raw: str, region: str) -> bool:
    """The matcher's own VALID test of a candidate read in `region`."""
    try:
        number = phonenumbers.parse(raw, region, keep_raw_input=True)
    except phonenumbers.NumberParseException:
        return False
    # The matcher argument is read only at stricter leniencies than VALID.
    return bool(_matcher_verify(Leniency.VALID, number, raw,
                                phonenumbers.PhoneNumberMatcher(raw, region)))


def parsing_regions(regions: list[str] | tuple[str, ...]) -> list[str]:
    """`regions` less those that parse every number as an earlier one does: regions of one
    calling code with the same national prefix rules (CA as US, both +1 and trunk 1).
    Validity is judged by the number's own region whichever region parsed it."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for region in regions:
        meta = PhoneMetadata.metadata_for_region(region)
        key: tuple[object, ...] = (region,) if meta is None else (
            meta.country_code, meta.national_prefix, meta.national_prefix_for_parsing,
            meta.national_prefix_transform_rule, meta.international_prefix)
        if key not in seen:
            seen.add(key)
            out.append(region)
    return out


def shortest_possible(region: str) -> int:
    """Digits of the region's shortest possible national number (local-only ones too); 1
    (never skipped) for a region without metadata."""
    meta = PhoneMetadata.metadata_for_region(region)
    desc = meta.general_desc if meta is not None else None
    if desc is None:
        return 1
    lengths = [n for n in (*(desc.possible_length or ()),
                           *(desc.possible_length_local_only or ())) if n > 0]
    return min(lengths, default=1)


def prose_number(raw: str, before: str, after: str = "") -> bool:
    """A decimal, a range of decimals or years, digits glued to a word (NCT0332991) or an
    id's letters (ORD-2026-595105, build 20261210.3), a date or time stamp, a number
    named as an order's, ticket's or build's: numbers of prose and business records,
    never taken for phones, valid or not."""
    # Glued to a word of a script written with spaces; Chinese and Japanese put no space
    # between a word and a number ("电话号码是+8610...", "+8131...を").
    glued = bool(before) and before[-1].isalpha() and not _UNSPACED.match(before[-1])
    if glued or raw.startswith("+"):  # no decimal, year range or amount starts with a `+`
        return glued
    if _DECIMAL.search(raw) or _YEARS.match(raw):
        return True
    core = raw.strip("() ")
    window = before[-CUE_WINDOW:]
    cued = bool(CUE.search(window) or AFTER_ADDRESS.search(window) or CUE_AFTER.match(after))
    # Ten digits from 1 are Unix seconds in a log, and a phone after "call" or an address.
    # A cue decides for a compact date too: "phone: 2016091581" is a number in New Jersey.
    bare = core.isdigit() and not cued and bool(_COMPACT_DATE.match(core)
                                                or _UNIX_TIME.match(core))
    return bool(bare or _ID_PREFIX.search(before[-17:]) or _ID_SUFFIX.match(after)
                or BUSINESS.search(before[-48:]) or _DATE.match(core)
                or amount(raw, before, after) or publication_number(raw, before)
                or _IN_TIME.search(before[-3:]) or after.startswith(":"))


def bare_shaped(raw: str, before: str, after: str, column: bool = False) -> bool:
    """Whether a valid number written as digits only reads as a phone: a cue before it,
    alone on its line, a trunk prefix, the shape of a served locale's mobile number, or a
    table of the text with a phone column (`column`). Written with groups, a `+` or an
    area code in brackets, a valid number is a phone."""
    # A number wholly in brackets, "(0280372)", is bare too: a reference, not an area code.
    raw = raw.strip("() ") if _AREA_IN_BRACKETS.search(raw) is None else raw
    if not raw.isdigit() or column:
        return True
    if _TRUNK.match(raw) or BARE_MOBILE.match(raw):
        return True
    window = before[-CUE_WINDOW:]
    if CUE.search(window) or AFTER_ADDRESS.search(window) or CUE_AFTER.match(after):
        return True
    return bool(re.search(r"(?:^|\n)[ \t]*$", before) and re.match(r"[ \t]*(?:\n|$)", after))


def phone_shaped(raw: str, before: str, after: str = "") -> bool:
    """Whether a possible-but-not-valid match is written like a phone number.

    `raw` is the matched text, `before` and `after` the text around it (for a cue word,
    or a number alone on its line as in a signature).
    """
    body = re.split(r"(?i)\s*(?:ext\.?|x|#)\s*\d+$", raw)[0]  # the extension aside
    digits = sum(c.isdigit() for c in body)
    core = body.strip("() ")  # "(2022-03-02)": a date in brackets
    if digits < MIN_POSSIBLE_DIGITS or any(p.match(core) for p in (_DATE, _DOTTED_QUAD, _SSN)):
        return False
    # An area code in brackets before more digits ("(415) 555-0199"); a number wholly in
    # brackets ("(4173870)") is a reference, as in a changelog.
    if body.startswith("+") or _AREA_IN_BRACKETS.search(body):
        return True
    if _TRUNK.match(body):  # a national or international prefix: 0xx..., 00xx...
        return True
    window = before[-CUE_WINDOW:]
    if CUE.search(window) or AFTER_ADDRESS.search(window) or LOCAL_SHAPE.match(body):
        return True
    alone = re.search(r"(?:^|\n)[ \t]*$", before) and re.match(r"[ \t]*(?:\n|$)", after)
    return bool(alone) or len(_GROUP.findall(body)) >= 3


class PossiblePhoneRecognizer(LocalRecognizer):
    """PHONE_NUMBER: valid numbers, and possible ones written like phone numbers."""

    SCORE = 0.5
    CONTEXT = ["phone", "number", "telephone", "cell", "cellphone", "mobile", "call", "fax"]

    def __init__(self, supported_regions: list[str], prefilter: bool = True) -> None:
        super().__init__(supported_entities=["PHONE_NUMBER"], supported_language="en",
                         context=self.CONTEXT, name="PossiblePhoneRecognizer")
        self.supported_regions = parsing_regions(supported_regions)
        self.prefilter = prefilter
        self.shortest = {r: shortest_possible(r) for r in self.supported_regions}

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        spans = digit_snippets(text) if self.prefilter else [(0, len(text), len(text))]
        # A CSV or Markdown table with a phone column: its rows' bare digits are phones.
        column = bool(spans) and PHONE_COLUMN.search(text) is not None
        found: dict[tuple[int, int], str] = {}
        for start, end, digits in spans:
            regions = [r for r in self.supported_regions if self.shortest[r] <= digits]
            snippet = text[start:end]
            for a, b, why in self._matches(snippet, regions, column):
                found.setdefault((a + start, b + start), why)
            # "+49 30 901820 10.0.4.17": the matcher reads the number and the address as one
            # (a decimal, so dropped). Read again with every address blanked, so the number
            # beside one is found on its own; the address is masked as IP_ADDRESS anyway.
            blanked = _ADDRESS.sub(lambda m: " " * len(m.group()), snippet)
            if blanked != snippet:
                for a, b, why in self._matches(blanked, regions, column):
                    found.setdefault((a + start, b + start), why + " beside an address")
        return [self._result(a, b, why) for (a, b), why in sorted(found.items())]

    def _matches(self, text: str, regions: list[str],
                 column: bool = False) -> list[tuple[int, int, str]]:
        out = []
        for region in regions:
            possible = list(phonenumbers.PhoneNumberMatcher(text, region,
                                                            leniency=Leniency.POSSIBLE))
            # Presidio's matches (VALID leniency) too: the matcher then also tries the inner
            # groups of a long candidate ("+1 415-555-0199 12"). Where every possible match
            # is a valid number, that pass finds these same matches (a candidate that is not
            # even possible is not valid, nor are its inner groups), so it is run only when
            # one is not.
            valid = possible
            if not all(_valid_whole(m, region) for m in possible):
                valid = list(phonenumbers.PhoneNumberMatcher(text, region,
                                                             leniency=Leniency.VALID))
            for m in valid:
                # 3-2-4 digits is a US SSN's layout (valid as a CZ or PL number too): left
                # to the SSN recognizer, so the placeholder names the right type.
                before, after = text[:m.start], text[m.end:]
                if not (_SSN.match(m.raw_string) or prose_number(m.raw_string, before, after)
                        or not bare_shaped(m.raw_string, before, after, column)):
                    out.append((m.start, m.end, f"valid {region} number"))
            for m in possible:
                before, after = text[:m.start], text[m.end:]
                if (phone_shaped(m.raw_string, before, after)
                        and not prose_number(m.raw_string, before, after)):
                    out.append((m.start, m.end, f"possible {region} number, phone-shaped"))
        return out

    def _result(self, start: int, end: int, why: str) -> RecognizerResult:
        return finding(self, "PHONE_NUMBER", start, end, self.SCORE, why)
