"""National identity and tax numbers of the served locales, by shape, check digits and cues.

| type | written | check |
|---|---|---|
| BR_CPF | 123.456.789-09, 12345678909 | two mod-11 digits |
| BR_CNPJ | 12.345.678/0001-95 | two mod-11 digits |
| IN_AADHAAR | 2345 6789 0123 | Verhoeff |
| CN_RESIDENT_ID | 11010519491231002X | ISO 7064 MOD 11-2, birth date |
| KR_RRN | 900101-1234567 | birth date; a check digit before October 2020 |
| DE_TAX_ID | 12 345 678 901 (Steuer-ID) | ISO 7064 MOD 11,10, digit rule |
| RU_PASSPORT | 45 08 123456 | none |
| US_SSN | 123-45-6789 | issued ranges (no 000, 666, 9xx area; no 00 group; no 0000 serial) |

and the person identifiers of every other country python-stdnum validates, one row each
in shared.text.id_catalogue (PESEL, TC Kimlik, AMKA, NIR, CURP, NIK, ...).

A number is taken when it passes its check and is written the way that number is printed
(grouped), or passes its check and the text names the kind anywhere (a CSV header `cpf`,
a JSON key `"aadhaar"`, a table column), or stands right after a label naming its kind
(`CPF:`, `"rrn": "`, `Паспорт`), where the digits alone suffice: a label says what the
number is even when a system wrote an invalid one. A number with no check digit (Russian
passport, Argentine DNI, Indonesian NIK, Vietnamese CCCD, ...) is taken only where a cue
names it. Bare digit runs with none of these (order numbers, timestamps, counts) are left
alone, and so is a number written as an amount (`Rp 5.537.000`, `4.416.000 ₫`), a version
(`firmware 9.14.67.234`) or an ISBN/ISSN, unless a label right before it names an id.
Input is the normalised view (shared.text.reader), so digits of any script and odd
separators read as ASCII.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache, partial
from unicodedata import is_normalized, normalize

from shared.text.checksums import (
    aadhaar_ok,
    cnpj_ok,
    cpf_ok,
    korean_rrn_ok,
    prc_resident_id_ok,
    ssn_ok,
    steuer_id_ok,
)
from shared.text.id_catalogue import CATALOGUE, Identifier

_D = r"(?<!\d)(?<!\d[./-])"  # no digit (or a number's mark and digit) before
_E = r"(?!\d|[./-]\d)"  # and none after


# A catalogued id may hold letters: no ASCII letter or digit (or one and a number's mark)
# on either side; another script's letters may touch it ("เลขบัตร3100600445635").
_AD = r"(?<![A-Za-z0-9])(?<![A-Za-z0-9][./-])"
_AE = r"(?![A-Za-z0-9]|[./-][A-Za-z0-9])"


def _digits(value: str) -> str:
    return re.sub(r"[^\dXx]", "", value)


def _alnum(value: str, keeps: str = "") -> str:
    return re.sub(rf"[^0-9A-Za-z{re.escape(keeps)}]", "", value).upper()


@dataclass(frozen=True)
class Kind:
    entity: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool]
    grouped: re.Pattern[str]  # the printed form, taken on its check alone
    cue: re.Pattern[str]  # words naming the kind
    compact: Callable[[str], str] = _digits  # what the check reads
    checked: bool = True  # a check digit: without one only a cue names it


def _kind(entity: str, pattern: str, check: Callable[[str], bool], grouped: str,
          cue: str) -> Kind:
    return Kind(entity, re.compile(_D + pattern + _E), check, re.compile(grouped),
                re.compile(rf"(?i)(?:{cue})"))


_NEVER = r"(?!)"


def _catalogued(row: Identifier) -> Kind:
    """A catalogue row as a kind: its printed layout, "." (any layout) where its bare run
    is taken on its check, else a layout never matched (a cue is needed)."""
    grouped = "." if row.bare and row.checked else (row.printed or _NEVER)
    # The view is NFKC: a cue reads as it does there (Thai "ำ" is "ํา" in NFKC).
    cues = row.cues if is_normalized("NFKC", row.cues) else \
        f"{row.cues}|{normalize('NFKC', row.cues)}"
    return Kind(row.entity, re.compile(f"{_AD}(?:{row.shape}){_AE}"), row.validator,
                re.compile(grouped), re.compile(rf"(?i)(?:{cues})"),
                partial(_alnum, keeps=row.keeps), row.checked)


KINDS: tuple[Kind, ...] = (
    _kind("BR_CPF", r"\d{3}[-. ]?\d{3}[-. ]?\d{3}[-. /]?\d{2}", cpf_ok,
          r"^\d{3}[. ]\d{3}[. ]\d{3}[-. /]\d{2}$", r"\bcpf\b"),
    _kind("BR_CNPJ", r"\d{2}[-. ]?\d{3}[-. ]?\d{3}[-/. ]?\d{4}[-. ]?\d{2}", cnpj_ok,
          r"^\d{2}\.?\d{3}\.?\d{3}/\d{4}-?\d{2}$", r"\bcnpj\b"),
    _kind("CN_RESIDENT_ID", r"[1-8]\d{5}[-. ]?(?:18|19|20)\d{2}[01]\d[0-3]\d[-. ]?\d{3}[\dXx]",
          prc_resident_id_ok, r".", r"身份证|居民身份|resident id|公民身份"),
    _kind("KR_RRN", r"\d{2}[01]\d[0-3]\d[-. ]?[1-8]\d{6}",
          lambda d: korean_rrn_ok(d, checksum=True),
          r"^\d{6}[-. ][1-8]\d{6}$", r"주민등록|주민번호|\brrn\b|resident registration"),
    _kind("IN_AADHAAR", r"[2-9]\d{3}[-. ]?\d{4}[-. ]?\d{4}", aadhaar_ok,
          r"^\d{4}([-. ])\d{4}\1\d{4}$", r"aadhaa?r|आधार|\buidai\b|\buid\b"),
    _kind("DE_TAX_ID", r"[1-9]\d[-. ]?\d{3}[-. ]?\d{3}[-. ]?\d{3}", steuer_id_ok,
          r"^\d{2} \d{3} \d{3} \d{3}$",
          r"steuer|\bidnr\b|identifikationsnummer|\btax[ -]?id\b|\btin\b"),
    # A US social security number: printed 3-2-4, or bare where the text names it ("ssn").
    _kind("US_SSN", r"\d{3}[- ]?\d{2}[- ]?\d{4}", ssn_ok, r"^\d{3}-\d{2}-\d{4}$",
          r"\bssn\b|social security"),
    # "№" reads as "No" in NFKC (the view), so both stand between series and number.
    _kind("RU_PASSPORT", r"\d{2}[-. ]?\d{2}[-. ]?(?:(?:№|No\.?)[ ]?)?\d{6}",
          lambda d: len(d) == 10, r"^\d{2} \d{2} (?:(?:№|No\.?) ?)?\d{6}$",
          r"паспорт|passport|серия|\bseries\b"),
)
US_SSN, RU_PASSPORT = KINDS[-2], KINDS[-1]
KINDS += tuple(_catalogued(row) for row in CATALOGUE)
# A label right before the number: the kind's cue, then at most a few marks ("CPF: ",
# '"cpf": "', "| CPF | ", "Паспорт серия ").
LABEL_GAP = re.compile(r"[\s\"'`:=|,;(\[{№#-]*(?:(?:no|nr|n[º°o]|номер|серия|и|number)"
                       r"[\s.:=\"'-]*)?$", re.I)
LABEL_REACH = 40
_RRN_SHAPE = re.compile(r"^\d{6}[-. ]?[1-8]\d{6}$")


def printed_form(digits: str) -> str | None:
    """`digits` in the printed form of the national number whose check digits they pass
    (CPF, Steuer-ID, Aadhaar, CNPJ, SSN), else None: how a reader reads a number dictated
    in words ("fünf sechs sieben null ..." is a Steuer-ID once its check holds)."""
    d, n = digits, len(digits)
    if n == 11 and cpf_ok(d):
        return f"{d[:3]}.{d[3:6]}.{d[6:9]}-{d[9:]}"
    if n == 11 and steuer_id_ok(d):
        return f"{d[:2]} {d[2:5]} {d[5:8]} {d[8:]}"
    if n == 12 and aadhaar_ok(d):
        return f"{d[:4]} {d[4:8]} {d[8:]}"
    if n == 14 and cnpj_ok(d):
        return f"{d[:2]}.{d[2:5]}.{d[5:8]}/{d[8:12]}-{d[12:]}"
    if n == 9 and ssn_ok(d):
        return f"{d[:3]}-{d[3:5]}-{d[5:]}"
    return None


def printed(value: str) -> bool:
    """Whether `value` is a national number in the form it is printed in: the layout and
    the check digits both ("080.962.998.48" has a CPF's layout, not its check)."""
    return any(kind.grouped.pattern not in (".", _NEVER) and kind.grouped.match(value)
               and kind.check(kind.compact(value)) for kind in KINDS)


# A text in the language of a kind's country names the kind as well as a cue word does,
# for kinds with a check: Hindi (Devanagari) for Aadhaar (1 in 10 random 12-digit numbers
# pass its Verhoeff check: a bare 12-digit number in Hindi text is masked), German (two
# of its function words) for the Steuer-ID (about 1 in 300 random 11-digit numbers pass).
_GERMAN = frozenset(str.split("der die das und nicht bitte während wir ist auf mit für des "
                              "dem den ein eine im zum zur"))
_LANGUAGE: dict[str, Callable[[str], bool]] = {
    "IN_AADHAAR": lambda text: re.search(r"[\u0900-\u097f]", text) is not None,
    "DE_TAX_ID": lambda text: len(_GERMAN & set(re.findall(r"\w+", text.lower()))) >= 2,
}


def _hints(cues: str) -> tuple[str, ...] | None:
    """The literal start of each alternative of `cues`, lower case (`\\bpesel\\b` ->
    "pesel"): a text holding none of them names none; None where an alternative starts
    with fewer than two literal letters (`c[ée]dula`)."""
    out = []
    for alternative in re.split(r"\|(?![^\[(]*[\])])", cues):
        m = re.match(r"(?:\\b)?([^\\\[\](){}?*+.|^$]+)", alternative)
        head = m.group(1) if m else ""
        rest = alternative[m.end():] if m else alternative
        if rest[:1] in ("?", "*", "{"):
            head = head[:-1]  # the last letter is optional
        if len(head) < 2 and not (head and not head.isascii()):  # "ת" of "ת.ז" will do
            return None
        out.append(normalize("NFKC", head).lower())
    return tuple(out)


_HINTS = {row.entity: _hints(row.cues) for row in CATALOGUE}


@lru_cache(maxsize=4)
def _lowered(text: str) -> str:
    return normalize("NFKC", text).lower().replace("_", " ")


def names_kind(kind: Kind, text: str) -> bool:
    """Whether `text` names `kind`: one of its cue words (in a snake_case key too:
    `"teudat_zehut"`, `my_number`), or written in its language."""
    hints = _HINTS.get(kind.entity)
    if hints is not None and not any(h in _lowered(text) for h in hints):
        return False  # a search per kind costs ~0.1 ms a text: most texts name none
    language = _LANGUAGE.get(kind.entity)
    return kind.cue.search(text) is not None or \
        ("_" in text and kind.cue.search(text.replace("_", " ")) is not None) or \
        (language is not None and language(text))


MIN_DIGITS = 4  # the fewest digits of any kind (an Indian PAN's)


def national_ids(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, entity) of every national number found in `text`."""
    if sum(map(str.isdigit, text)) < MIN_DIGITS:
        return
    for kind in KINDS:
        named: bool | None = None  # looked up once, on the kind's first candidate
        for m in kind.pattern.finditer(text):
            if named is None:
                named = names_kind(kind, text)
            value = m.group()
            if _taken(kind, text, m.start(), m.end(), value, kind.compact(value), named):
                yield m.start(), m.end(), kind.entity


def _taken(kind: Kind, text: str, start: int, end: int, value: str, digits: str,
           named: bool) -> bool:
    if _labelled(kind, text, start):
        return kind.entity != "KR_RRN" or bool(_RRN_SHAPE.match(value)) or \
            korean_rrn_ok(digits, checksum=False)
    if kind.entity == "KR_RRN" and kind.grouped.match(value):
        return korean_rrn_ok(digits, checksum=False)  # numbers since 2020 have no check digit
    if not kind.check(digits) or ordinary(text, start, end):
        return False
    if kind.entity == "RU_PASSPORT":  # no check digit: the text must name it, or its
        # printed form must ("40 12 № 205197": series, the number sign, number)
        return named or ("№" in value or "No" in value) and bool(kind.grouped.match(value))
    if not kind.checked:
        return named
    return bool(kind.grouped.match(value)) or named


# What makes a number an amount, a version or a book's number: a currency symbol or code
# beside it, a version word or a `v` right before it, an ISBN/ISSN cue before it, or the
# ISBN-13 prefix 978/979 with its groups.
_CURRENCY = (r"[$€£¥₹₫₩₽₺₪฿₱₦₴₸₡₲₵]|\b(?:rp|rs|usd|eur|gbp|jpy|cny|rmb|inr|idr|vnd|thb|try|"
             r"pln|mxn|brl|ars|clp|cop|pen|zar|ils|rub|uah|krw|chf|sek|nok|dkk|czk|huf|ron|"
             r"bgn|aud|cad|nzd|myr|pkr|egp|ngn|kes|ghs|tl|zł|kč|ft|lei|kr|r\$|dong|đ|bath|baht)")
_AMOUNT_BEFORE = re.compile(rf"(?i)(?:{_CURRENCY})\.?\s?$")
_AMOUNT_AFTER = re.compile(rf"(?i)^\s?(?:{_CURRENCY})(?![^\W\d_])")
_VERSION_BEFORE = re.compile(r"(?i)(?:\b(?:firmware|version|ver|release|build|rev|revision|"
                             r"patch)\b[\s:=#]*(?:v|no\.?|nr\.?)?\s?|\bv\.?\s?)$")
_ISBN_BEFORE = re.compile(r"(?i)\b(?:isbn|issn|ismn)(?:-1[03])?\b[\s:=#-]*$")
_ISBN13 = re.compile(r"^97[89][- ]")


def ordinary(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is written as an amount, a version or an ISBN/ISSN."""
    before = text[max(0, start - 24):start]
    return bool(_AMOUNT_BEFORE.search(before) or _AMOUNT_AFTER.match(text[end:end + 6])
                or _VERSION_BEFORE.search(before) or _ISBN_BEFORE.search(before)
                or _ISBN13.match(text[start:end]))


def _labelled(kind: Kind, text: str, start: int) -> bool:
    before = text[max(0, start - LABEL_REACH):start]
    cues = list(kind.cue.finditer(before))
    return bool(cues) and bool(LABEL_GAP.match(before[cues[-1].end():]))
