"""Phone numbers: every number that is *possible* in a configured region, not only *valid*.

Presidio's PhoneRecognizer keeps only numbers python-phonenumbers calls valid, that is
inside a currently assigned range; a fictional or test number (an unassigned area code,
555 exchanges) is still personal data in a ticket and was let through. Here a number that
is merely possible (right length for its region) is taken too, but only when it is
written the way phone numbers are written, so that ports, ticket ids, versions, dates and
IP addresses stay: it starts with `+` (E.164) or a trunk prefix, has a parenthesised area
code, is written in three or more digit groups or as a 7-digit local number, stands alone
on its line (a signature), follows a word like "phone" or "callback", or is offered as the
alternative to an e-mail address ("anna@example.com or 56520319"). Valid numbers are
taken whatever their shape, as before. Extensions ("x42", "ext. 123") are part of a match.

phonenumbers' matcher is the cost; it runs only on snippets around digit chains (a chain
is digit blocks joined by at most four punctuation characters, a superset of what the
matcher can find), with context around each so the results equal a whole-text run, and
per snippet only for the regions where a number as long as its longest chain is possible
at all: a match's national number never has more digits than the chain it lies in, so a
region whose shortest possible number is longer cannot match there (most of a scientific
abstract's chains are years and counts of 4-5 digits, possible in 3 and 9 of the 22 default
regions; profiled on 100 SciFact abstracts, the recognizer's share of redaction's time fell
from about 28% to 14-20%).
"""

from __future__ import annotations

import re

import phonenumbers
from phonenumbers import Leniency, PhoneMetadata
from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from services.redaction.recognizers import finding

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
                 r"number|no|nr|ph|tél|telefon|handy|portable)\b[\w ]{0,20}\W{0,3}$")
# "... at anna@example.com or 56520319": a number offered as the alternative to an address.
AFTER_ADDRESS = re.compile(r"\S@\S+\s+(?:or|/|,)\s*$")
CUE_WINDOW = 40
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


def prose_number(raw: str, before: str) -> bool:
    """A decimal, a range of decimals or years, or digits glued to a word (NCT0332991):
    numbers of prose and identifiers, never taken for phones, valid or not."""
    glued = bool(before) and before[-1].isalpha()
    return glued or bool(_DECIMAL.search(raw) or _YEARS.match(raw))


def phone_shaped(raw: str, before: str, after: str = "") -> bool:
    """Whether a possible-but-not-valid match is written like a phone number.

    `raw` is the matched text, `before` and `after` the text around it (for a cue word,
    or a number alone on its line as in a signature).
    """
    body = re.split(r"(?i)\s*(?:ext\.?|x|#)\s*\d+$", raw)[0]  # the extension aside
    digits = sum(c.isdigit() for c in body)
    if digits < MIN_POSSIBLE_DIGITS or any(p.match(body) for p in (_DATE, _DOTTED_QUAD, _SSN)):
        return False
    if body.startswith("+") or "(" in body:
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
        self.supported_regions = list(supported_regions)
        self.prefilter = prefilter
        self.shortest = {r: shortest_possible(r) for r in self.supported_regions}

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        spans = digit_snippets(text) if self.prefilter else [(0, len(text), len(text))]
        found: dict[tuple[int, int], str] = {}
        for start, end, digits in spans:
            regions = [r for r in self.supported_regions if self.shortest[r] <= digits]
            snippet = text[start:end]
            for a, b, why in self._matches(snippet, regions):
                found.setdefault((a + start, b + start), why)
            # "+49 30 901820 10.0.4.17": the matcher reads the number and the address as one
            # (a decimal, so dropped). Read again with every address blanked, so the number
            # beside one is found on its own; the address is masked as IP_ADDRESS anyway.
            blanked = _ADDRESS.sub(lambda m: " " * len(m.group()), snippet)
            if blanked != snippet:
                for a, b, why in self._matches(blanked, regions):
                    found.setdefault((a + start, b + start), why + " beside an address")
        return [self._result(a, b, why) for (a, b), why in sorted(found.items())]

    def _matches(self, text: str, regions: list[str]) -> list[tuple[int, int, str]]:
        out = []
        for region in regions:
            # Presidio's matches first: at VALID leniency the matcher also tries the inner
            # groups of a long candidate ("+1 415-555-0199 12"), which POSSIBLE does not.
            for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=Leniency.VALID):
                # 3-2-4 digits is a US SSN's layout (valid as a CZ or PL number too): left
                # to the SSN recognizer, so the placeholder names the right type.
                if not (_SSN.match(m.raw_string) or prose_number(m.raw_string, text[:m.start])):
                    out.append((m.start, m.end, f"valid {region} number"))
            for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=Leniency.POSSIBLE):
                if (phone_shaped(m.raw_string, text[:m.start], text[m.end:])
                        and not prose_number(m.raw_string, text[:m.start])):
                    out.append((m.start, m.end, f"possible {region} number, phone-shaped"))
        return out

    def _result(self, start: int, end: int, why: str) -> RecognizerResult:
        return finding(self, "PHONE_NUMBER", start, end, self.SCORE, why)
