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

A number is taken when it passes its check and is written the way that number is printed
(grouped), or passes its check and the text names the kind anywhere (a CSV header `cpf`,
a JSON key `"aadhaar"`, a table column), or stands right after a label naming its kind
(`CPF:`, `"rrn": "`, `Паспорт`), where the digits alone suffice: a label says what the
number is even when a system wrote an invalid one. Bare digit runs with none of these
(order numbers, timestamps, counts) are left alone. Input is the normalised view
(shared.text.reader), so digits of any script and odd separators read as ASCII.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from shared.text.checksums import (
    aadhaar_ok,
    cnpj_ok,
    cpf_ok,
    korean_rrn_ok,
    prc_resident_id_ok,
    ssn_ok,
    steuer_id_ok,
)

_D = r"(?<!\d)(?<!\d[./-])"  # no digit (or a number's mark and digit) before
_E = r"(?!\d|[./-]\d)"  # and none after


@dataclass(frozen=True)
class Kind:
    entity: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool]
    grouped: re.Pattern[str]  # the printed form, taken on its check alone
    cue: re.Pattern[str]  # words naming the kind


def _kind(entity: str, pattern: str, check: Callable[[str], bool], grouped: str,
          cue: str) -> Kind:
    return Kind(entity, re.compile(_D + pattern + _E), check, re.compile(grouped),
                re.compile(rf"(?i)(?:{cue})"))


KINDS = (
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
    digits = re.sub(r"[^\dXx]", "", value)
    return any(kind.grouped.match(value) and kind.grouped.pattern != "." and kind.check(digits)
               for kind in KINDS)


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


def names_kind(kind: Kind, text: str) -> bool:
    """Whether `text` names `kind`: one of its cue words, or written in its language."""
    language = _LANGUAGE.get(kind.entity)
    return kind.cue.search(text) is not None or (language is not None and language(text))


def national_ids(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, entity) of every national number found in `text`."""
    if sum(c.isdigit() for c in text) < 9:
        return
    named = {k.entity: names_kind(k, text) for k in KINDS}
    for kind in KINDS:
        for m in kind.pattern.finditer(text):
            value = m.group()
            digits = re.sub(r"[^\dXx]", "", value)
            if _taken(kind, text, m.start(), value, digits, named[kind.entity]):
                yield m.start(), m.end(), kind.entity


def _taken(kind: Kind, text: str, start: int, value: str, digits: str, named: bool) -> bool:
    if _labelled(kind, text, start):
        return kind.entity != "KR_RRN" or bool(_RRN_SHAPE.match(value)) or \
            korean_rrn_ok(digits, checksum=False)
    if kind.entity == "KR_RRN" and kind.grouped.match(value):
        return korean_rrn_ok(digits, checksum=False)  # numbers since 2020 have no check digit
    if not kind.check(digits):
        return False
    if kind.entity == "RU_PASSPORT":  # no check digit: the text must name it, or its
        # printed form must ("40 12 № 205197": series, the number sign, number)
        return named or ("№" in value or "No" in value) and bool(kind.grouped.match(value))
    return bool(kind.grouped.match(value)) or named


def _labelled(kind: Kind, text: str, start: int) -> bool:
    before = text[max(0, start - LABEL_REACH):start]
    cues = list(kind.cue.finditer(before))
    return bool(cues) and bool(LABEL_GAP.match(before[cues[-1].end():]))
