"""How a planted value is written: the forms of scripts/benchlib/pii_planted.py, each a
function of the value (scripts/benchlib/pii_values.Value), a variant and the locale's words.

A rendering keeps track of where each identifying character of the value went (`units`:
ranges of the rendered text), whatever it became: a digit word, a digit of another script,
a look-alike letter, a percent-escape, a JSON escape. Base64 is one unit over the token.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from scripts.benchlib.pii_texts import TEXTS, Texts
from scripts.benchlib.pii_values import Value


@dataclass(frozen=True)
class Rendered:
    text: str
    units: tuple[tuple[int, int], ...]  # ranges of text that carry identifying characters


class _Out:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.units: list[tuple[int, int]] = []
        self.at = 0

    def add(self, piece: str, ident: bool = False) -> None:
        if ident and piece:
            self.units.append((self.at, self.at + len(piece)))
        self.parts.append(piece)
        self.at += len(piece)

    def done(self) -> Rendered:
        return Rendered("".join(self.parts), tuple(self.units))


def per_char(value: Value, f: Callable[[str], str]) -> Rendered:
    out = _Out()
    for c, ident in zip(value.text, value.ident, strict=True):
        out.add(f(c), ident)
    return out.done()


@functools.cache
def digit_scripts() -> dict[str, str]:
    """Every decimal digit script of this Python's Unicode database: name -> its zero."""
    found = {}
    for cp in range(0x80, sys.maxunicode + 1):
        c = chr(cp)
        if unicodedata.category(c) == "Nd" and unicodedata.digit(c) == 0:
            found[unicodedata.name(c).rsplit(" DIGIT", 1)[0].lower()] = c
    return found


OWN_DIGITS = {"hi-IN": "devanagari", "ar": "arabic-indic"}  # else fullwidth
SEPARATORS = {"dots": ".", "dot run": ". . ", "middle dot": "·", "slash": "/",
              "slash run": " / ", "thin space": "\u2009", "no-break space": "\u00a0",
              "narrow no-break space": "\u202f", "line break": "\n", "dash run": " - ",
              "mixed": ""}
AT_DOT = {"at/dot": (" at ", " dot "), "[at]/[dot]": (" [at] ", " [dot] "),
          "(at)/(dot)": ("(at)", "(dot)"), "{at}/{dot}": (" {at} ", " {dot} "),
          "AT/DOT": (" AT ", " DOT "), "own language": (" at ", " dot ")}
CYRILLIC = {"a": "а", "c": "с", "e": "е", "i": "і", "j": "ј", "o": "о", "p": "р", "s": "ѕ",
            "x": "х", "y": "у", "h": "һ"}
GREEK = {"a": "α", "i": "ι", "k": "κ", "o": "ο", "p": "ρ", "t": "τ", "u": "υ", "v": "ν",
         "x": "χ"}
OCR = {"0": "O", "1": "l", "2": "Z", "5": "S", "6": "b", "8": "B", "9": "g"}


def plain(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    return per_char(value, lambda c: c)


def _words(texts: Texts, variant: str) -> tuple[tuple[str, ...], str]:
    if variant == "English":
        return TEXTS["en"].digit_words, " "
    return texts.digit_words, texts.joiner


def spelled(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """Each digit as its word; where the written value had a separator, a comma."""
    words, joiner = _words(texts, variant)
    out, started, broke = _Out(), False, False
    for c, ident in zip(value.text, value.ident, strict=True):
        if c.isalnum():
            if started:
                out.add(("、" if not joiner else ", ") if broke else joiner)
            out.add(words[int(c)] if c.isdigit() else c, ident)
            started, broke = True, False
        elif c == "+" and not started:
            out.add("+")
        elif started:
            broke = True
    return out.done()


def mixed(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """Some digits as words, the others as digits, the value's separators kept."""
    words, joiner = _words(texts, variant)
    out, last_word = _Out(), None
    for c, ident in zip(value.text, value.ident, strict=True):
        word = c.isdigit() and rng.random() < 0.5
        if c.isalnum() and last_word is not None and (word or last_word):
            out.add(joiner)
        out.add(words[int(c)] if word else c, ident)
        last_word = word if c.isalnum() else None
    return out.done()


def other_digits(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    zero = ord(digit_scripts()[variant])
    return per_char(value, lambda c: chr(zero + int(c)) if c.isdigit() else c)


def separated(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """The value's own separators replaced by runs of `variant` between groups of 1-4."""
    out, size, run = _Out(), rng.randint(1, 4), 0
    for c, ident in zip(value.text, value.ident, strict=True):
        if not c.isalnum():
            if c == "+" and not out.parts:
                out.add(c)
            continue
        if run == size:
            sep = SEPARATORS[variant] or rng.choice([s for s in SEPARATORS.values() if s])
            out.add(sep)
            run = 0
        out.add(c, ident)
        run += 1
    return out.done()


def spaced(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    out = _Out()
    for k, (c, ident) in enumerate(zip(value.text, value.ident, strict=True)):
        out.add(" " if k else "")
        out.add("" if c == " " else c, ident)
    return out.done()


def ocr(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """Digits a scanner misread as the letters they look like (at least one of them)."""
    able = [i for i, c in enumerate(value.text) if c in OCR]
    chosen = {i for i in able if rng.random() < 0.4} or set(rng.sample(able, min(1, len(able))))
    out = _Out()
    for i, (c, ident) in enumerate(zip(value.text, value.ident, strict=True)):
        out.add(OCR[c] if i in chosen else c, ident)
    return out.done()


def at_dot(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    at, dot = texts.at_dot if variant == "own language" and texts.at_dot else AT_DOT[variant]
    local_dots = rng.random() < 0.5
    seen_at = False
    out = _Out()
    for c, ident in zip(value.text, value.ident, strict=True):
        if c == "@":
            out.add(at)
            seen_at = True
        elif c == "." and (seen_at or local_dots):
            out.add(dot)
        else:
            out.add(c, ident)
    return out.done()


def lookalike(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """One to three letters of the mailbox swapped for Cyrillic or Greek look-alikes."""
    tables = {"Cyrillic": [CYRILLIC], "Greek": [GREEK], "both": [CYRILLIC, GREEK]}[variant]
    able = [i for i, c in enumerate(value.text) if any(c in t for t in tables)]
    chosen = set(rng.sample(able, min(len(able), rng.randint(1, 3))))
    out = _Out()
    for i, (c, ident) in enumerate(zip(value.text, value.ident, strict=True)):
        if i in chosen:
            c = rng.choice([t[c] for t in tables if c in t])
        out.add(c, ident)
    return out.done()


def url_query(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """As a browser writes a query value: reserved and non-ASCII characters escaped."""
    return per_char(value, lambda c: "+" if c == " " and variant == "+" else quote(c, safe=""))


def percent(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """Every character percent-escaped, letters and digits too."""
    hexfmt = "%{:02X}" if variant == "upper" else "%{:02x}"
    return per_char(value, lambda c: "".join(hexfmt.format(b) for b in c.encode()))


def json_string(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    """The inside of a JSON string, non-ASCII as \\u escapes when `variant` says so."""
    return per_char(value, lambda c: json.dumps(c, ensure_ascii=variant == "\\u escapes")[1:-1])


def b64(value: Value, variant: str, texts: Texts, rng: random.Random) -> Rendered:
    raw = value.text if variant == "value" else json.dumps({value.type: value.text})
    token = base64.b64encode(raw.encode()).decode()
    return Rendered(token, ((0, len(token)),))


Renderer = Callable[[Value, str, Texts, random.Random], Rendered]
RENDERERS: dict[str, Renderer] = {
    "plain": plain, "spelled": spelled, "mixed": mixed, "digits": other_digits,
    "separators": separated, "at_dot": at_dot, "lookalike": lookalike, "spaced": spaced,
    "ocr": ocr, "url": url_query, "percent": percent, "json": json_string, "csv": plain,
    "markdown": plain, "chat": plain, "greeting": plain, "signature": plain, "base64": b64,
}


def variants(form: str, locale: str) -> tuple[str, ...]:
    """The variants a form cycles through in `locale` ("" where it has none)."""
    if form in ("spelled", "mixed"):
        return ("own language",) if locale == "en" else ("own language", "English")
    if form == "digits":
        own = OWN_DIGITS.get(locale, "fullwidth")
        return (own, *(s for s in digit_scripts() if s != own))
    if form == "at_dot":
        words = locale != "en" and TEXTS[locale].at_dot is not None
        return tuple(v for v in AT_DOT if words or v != "own language")
    table = {"separators": tuple(SEPARATORS),
             "lookalike": ("Cyrillic", "Greek", "both"), "url": ("%20", "+"),
             "percent": ("upper", "lower"), "json": ("UTF-8", "\\u escapes"),
             "base64": ("value", "JSON of it")}
    return table.get(form, ("",))


def render(value: Value, form: str, variant: str, locale: str,
           rng: random.Random) -> Rendered:
    return RENDERERS[form](value, variant, TEXTS[locale], rng)
