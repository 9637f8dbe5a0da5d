"""Digits written as words, read as the digits they stand for ("five two three two" -> 5232).

A phone, card or id number dictated into a chat or a call note is written out in words,
alone or mixed with digits: "plus four four, two zero seven nine ...", "98 seven six 5".
The words of the served locales (English, German, Portuguese, Spanish, French, Russian,
Hindi, Arabic) are read where at least two of them (one after a "+") and at least six
digits stand in one run of number words and digit groups, brackets and marks between them;
Chinese/Japanese numerals (一二三) and Sino-Korean digit syllables (일이삼) where seven or
more stand together. Shorter runs ("one or two
retries", "third and four") are prose and stay as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from shared.text.national_ids import printed_form
from shared.text.scripts import CJK

_WORDS = {
    0: "zero oh nought naught null cero zéro ноль нуль शून्य صفر",
    1: "one eins um uno un один одна एक واحد",
    2: "two zwei zwo dois duas dos deux два две दो اثنان اثنين",
    3: "three drei três tres trois три तीन ثلاثة",
    4: "four vier quatro cuatro quatre четыре चार أربعة اربعة",
    5: "five fünf cinco cinq пять पांच पाँच خمسة",
    6: "six sechs seis шесть छह छः ستة",
    7: "seven sieben sete siete sept семь सात سبعة",
    8: "eight acht oito ocho huit восемь आठ ثمانية",
    9: "nine neun nove nueve neuf девять नौ تسعة",
}
DIGIT_OF = {w: str(d) for d, words in _WORDS.items() for w in words.split()}
# "oh" is a zero only between other number words ("five oh two"), never first.
_ONLY_INSIDE = frozenset({"oh"})
_REPEAT = {"double": 2, "triple": 3}
_ALT = "|".join(sorted(map(re.escape, DIGIT_OF), key=len, reverse=True))
# Not inside a word; Chinese, Japanese and Korean text may stand right beside it ("是six").
_CJK_LETTER = f"[{CJK}]"
_NOT_LETTER = rf"[^\W\d_{CJK}]"
_WORD = rf"(?<!{_NOT_LETTER})(?:(?:double|triple)[ \t]+)?(?:{_ALT})(?!{_NOT_LETTER})"
# Digits and capitals of a code ("3NWBK", "1P5"), and capitals alone ("G B one eight, B A R
# C, ..." of an IBAN): kept as written inside a run.
_CODE = r"(?-i:[A-Z]*\d[A-Z\d]*|[A-Z]{1,4}(?![^\W\d_]))"
_TOKEN = rf"(?:{_WORD}|{_CODE})"
# Brackets part groups too ("(20 one) two 86-1848").
# "№" reads as "No" in the view: "four six 0 eight № three 5 seven 601" (a passport).
_SEP = r"(?:[ \t]*(?:[,;:/.\-–—№()]|(?-i:No)\.?)[ \t]*|[ \t]*\n[ \t]*|[ \t]+)"
_RUN = re.compile(rf"(?i)(?:(?<![\w+])(?:plus|mais)[ \t]+|\+[ \t]*)?"
                  rf"(?<![\w-](?<!{_CJK_LETTER})){_TOKEN}(?:{_SEP}{_TOKEN})+")
_ANY_WORD = re.compile(rf"(?i){_WORD}")
_PIECE = re.compile(rf"(?i)(?P<word>{_WORD})|(?P<digits>{_CODE})|(?P<sep>{_SEP})"
                    r"|(?P<plus>\+|plus|mais)")
MIN_WORDS, MIN_DIGITS = 2, 6
_CHECK_X = re.compile(r"([ \t]+)[Xx](?![^\W\d_])")
# Numerals that are digits in Chinese and Japanese, and Sino-Korean digit syllables.
_CJK = "〇零一二三四五六七八九"
_HANGUL = "공영일이삼사오육칠팔구"
_CJK_DIGIT = {**{c: str(i) for i, c in enumerate("〇一二三四五六七八九")}, "零": "0",
              **{c: str(i) for i, c in enumerate("영일이삼사오육칠팔구")}, "공": "0"}
# Runs of them, digits written as digits mixed in ("0 오 공 1 이 0-4 ..."), with the
# separators a dictated number is written with (spaces, dashes, commas, 、).
_EAST_SEP = r"[ \t\-－・,，、]{0,3}"
_EAST = re.compile(rf"[{_CJK}0-9](?:{_EAST_SEP}[{_CJK}0-9]){{6,}}|"
                   rf"[{_HANGUL}0-9](?:{_EAST_SEP}[{_HANGUL}0-9]){{6,}}")
MIN_EAST_DIGITS = 7
MIN_EAST_NUMERALS = 2  # numerals among them: a run of ASCII digits alone is not spelled


def spelled_edits(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, replacement) for every run of spelled digits in `text`, in order."""
    edits = list(_word_runs(text)) if _ANY_WORD.search(text) else []
    edits += _east_runs(text)
    yield from sorted(edits)


def _word_runs(text: str) -> Iterator[tuple[int, int, str]]:
    for run in _RUN.finditer(text):
        pieces = _trimmed(list(_PIECE.finditer(run.group())))
        words = [p for p in pieces if p.lastgroup == "word"]
        while pieces and pieces[0].lastgroup == "word" and \
                pieces[0].group().lower() in _ONLY_INSIDE:
            pieces = pieces[1:]
            words = words[1:]
        digits = sum(len(_digits_of(p.group())) if p.lastgroup == "word"
                     else sum(c.isdigit() for c in p.group())
                     for p in pieces if p.lastgroup in ("word", "digits"))
        # One word is enough after a "+": an international number with a digit spelled
        # ("+971 2 266 4 three 95").
        # So is one inside a printed number's groups, nine digits or more ("815-1 five-8155").
        least = 1 if pieces and (pieces[0].lastgroup == "plus" or (
            digits >= 9 and pieces[0].lastgroup == "digits"
            and pieces[-1].lastgroup == "digits"
            and any(p.lastgroup == "sep" and p.group().strip() == "-" for p in pieces))
            or _last_group_spelled(pieces, digits)) else MIN_WORDS
        if len(words) < least or digits < MIN_DIGITS:
            continue
        end = run.start() + pieces[-1].end()
        value = "".join(c for p in pieces for c in (
            _digits_of(p.group()) if p.lastgroup == "word" else p.group()) if c.isdigit())
        # Dictated without the marks of a printed form (spaces and commas between groups):
        # a national number whose check holds reads in its printed form.
        form = printed_form(value) if len(words) >= MIN_WORDS and all(
            p.group().isdigit() if p.lastgroup == "digits" else
            p.lastgroup == "word" or (p.lastgroup == "sep" and p.group().strip(" \t,") == "")
            for p in pieces) else None
        if form is not None:
            yield run.start() + pieces[0].start(), end, form
        else:
            yield from _run_edits(run.start(), pieces)
        check = _CHECK_X.match(text, end)
        if digits == 17 and check:  # a PRC resident id's check character, "... eight X"
            yield end, check.end(1), ""


def _last_group_spelled(pieces: list[re.Match[str]], digits: int) -> bool:
    """A printed number of three digit groups or more whose last digit is spelled: "010
    1171 361 three" (nine digits or more, spaces alone between them)."""
    groups = [p for p in pieces if p.lastgroup == "digits"]
    return (digits >= 9 and len(groups) >= 3 and pieces[-1].lastgroup == "word"
            and all(p.group().isdigit() for p in groups)
            and all(p.lastgroup != "word" for p in pieces[:-1])
            and all(not p.group().strip(" \t") for p in pieces if p.lastgroup == "sep"))


def _trimmed(pieces: list[re.Match[str]]) -> list[re.Match[str]]:
    """The run without what ends it in capitals alone: the next line's label or code
    ("... six nine one seven\nSSN: ...", "... zwei\nX-Debug-Context"), and the marks before."""
    while pieces and (pieces[-1].lastgroup == "sep" or (
            pieces[-1].lastgroup == "digits" and not any(c.isdigit() for c in pieces[-1][0]))):
        pieces = pieces[:-1]
    return pieces


def _digits_of(word: str) -> str:
    parts = word.lower().split()
    times = _REPEAT.get(parts[0], 1) if len(parts) > 1 else 1
    return DIGIT_OF[parts[-1]] * times


def _run_edits(base: int, pieces: list[re.Match[str]]) -> Iterator[tuple[int, int, str]]:
    """Each word as its digits; a gap of spaces as nothing (the reader joins dictated
    digits), any other separator as one space or dash."""
    for p in pieces:
        a, b = base + p.start(), base + p.end()
        kind = p.lastgroup
        if kind == "word":
            yield a, b, _digits_of(p.group())
        elif kind == "plus":
            yield a, b, "+"
        elif kind == "sep":
            raw = p.group()
            if "(" in raw or ")" in raw:
                continue  # kept as written: "(201) 286", "8 (912)"
            if not raw.strip(" \t"):
                yield a, b, ""  # dictated digits run together; a mark separates groups
            else:
                yield a, b, "-" if raw.strip() and raw.strip() in "-–—" else " "


def _east_runs(text: str) -> Iterator[tuple[int, int, str]]:
    if not any(c in text for c in _CJK + _HANGUL):
        return
    for m in _EAST.finditer(text):
        numerals = sum(c in _CJK_DIGIT for c in m.group())
        if (numerals < MIN_EAST_NUMERALS
                or numerals + sum(c.isdigit() for c in m.group()) < MIN_EAST_DIGITS
                or _fields(m.group())):
            continue
        for i, c in enumerate(m.group(), m.start()):
            if c in _CJK_DIGIT:
                yield i, i + 1, _CJK_DIGIT[c]
            elif c in " \t":
                yield i, i + 1, ""
            elif not c.isdigit():
                yield i, i + 1, "-"


def _fields(run: str) -> bool:
    """Whether commas part the run into fields of numerals alone and of digits alone: a
    CSV row's name beside its number ("이영일,4298 0242 ...": 이영일 is a name), not one
    number dictated partly in words."""
    kinds = set()
    for part in re.split(r"[,，]", run):
        body = re.sub(r"[ \t\-－・、]", "", part)
        if body:
            kinds.add("digits" if body.isascii() else
                      "numerals" if not any(c.isdigit() for c in body) else "mixed")
    return kinds == {"digits", "numerals"}
