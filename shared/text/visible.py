"""The text a reader sees, with a map back to the characters it came from.

A card number hidden with zero-width spaces, soft hyphens, bidi marks, combining marks,
mathematical bold or fullwidth digits, or split over Markdown table cells reads as the
number to a person, but not to a pattern or an NER model. `reading_view` builds what a
reader sees:

- removed: format characters (Cf: zero-width space/joiners, soft hyphen, bidi marks and
  isolates, BOM, word joiner, tag characters), invisible fillers (Hangul fillers, braille
  blank, Mongolian vowel separator), and combining marks on a base that reads as ASCII;
- each other character in its NFKC form (fullwidth @ and digits, mathematical digits,
  ligatures, odd spaces), and any decimal digit of any script as its ASCII digit;
- between two digits: a table cell border (`|`), a line break or a run of spaces becomes
  one space, any dash one `-`, and O/o/I/l the digit they stand in for when the token
  around them is digits otherwise (not in `3o4x` or a base58 address).

Every character of the view knows the span of original characters it stands for (a
removed character belongs to the one before it), so a
finding on the view is masked over the whole original span, hidden characters included.
Analysing the view instead of the text changes nothing for text that has none of these:
`reading_view(t).text == t` there, and the map is the identity.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

# Visible to nobody, but not format characters (Cf) to Unicode.
FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e\u17b4\u17b5\u034f")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_BETWEEN_DIGITS = re.compile(
    r"(?<=\d)(?:(?P<cell>[ \t]*[|\u2502\u00a6][ \t]*)|(?P<gap>[ \t]*\r?\n[ \t]*|[ \t]{2,})"
    r"|(?P<dash>[\u2010-\u2015\u2212\ufe58\ufe63\uff0d])|(?P<zero>[Oo])|(?P<one>[Il]))(?=\d)")
_TOKEN = re.compile(r"[^\W_]+")
_DIGITISH = re.compile(r"[\dOoIl]+")
_AS = {"cell": " ", "gap": " ", "dash": "-", "zero": "0", "one": "1"}


@dataclass(frozen=True)
class View:
    """`text` as read, and for each of its characters the original [start, end)
    (`starts`/`ends`; empty when the view is the text itself)."""

    text: str
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.starts

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span that view[start:end] was read from (end > start)."""
        if self.identical:
            return start, end
        return self.starts[start], self.ends[end - 1]


def is_invisible(ch: str) -> bool:
    """A character that shows nothing: whitespace, controls, format marks, fillers."""
    return ch.isspace() or ch in FILLERS or unicodedata.category(ch) in (
        "Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me", "Co", "Cn")


def blank(text: str) -> bool:
    """True when nothing in `text` can be seen."""
    return all(is_invisible(ch) for ch in text)


def reading_view(text: str) -> View:
    """What a reader sees of `text`, mapped back to it (see the module docstring)."""
    first = _characters(text) or View(text)
    second = _between_digits(first.text)
    if second is None:
        return first
    if first.identical:
        return second
    starts = [first.starts[s] for s in second.starts]
    ends = [first.ends[e - 1] for e in second.ends]
    return View(second.text, starts, ends)


def _characters(text: str) -> View | None:
    """Per character: removed, NFKC-folded or a digit; None when nothing changes."""
    if text.isascii():
        return None
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    changed = False
    pos = 0
    for run in _NON_ASCII.finditer(text):
        a, b = run.span()
        out.append(text[pos:a])
        starts.extend(range(pos, a))
        ends.extend(range(pos + 1, a + 1))
        last = next((piece[-1] for piece in reversed(out) if piece), "")
        for i in range(a, b):
            ch = text[i]
            read = _read(ch, last)
            if read != ch:
                changed = True
            if read:
                last = read[-1]
            elif ends:  # a removed character belongs to the one it follows
                ends[-1] = i + 1
            out.append(read)
            starts.extend([i] * len(read))
            ends.extend([i + 1] * len(read))
        pos = b
    if not changed:
        return None
    out.append(text[pos:])
    starts.extend(range(pos, len(text)))
    ends.extend(range(pos + 1, len(text) + 1))
    return View("".join(out), starts, ends)


def _read(ch: str, before: str) -> str:
    """How one non-ASCII character reads after the view's last character `before`."""
    category = unicodedata.category(ch)
    if category == "Cf" or ch in FILLERS:
        return ""
    if category in ("Mn", "Me"):
        return "" if before.isascii() else ch  # a mark on a digit or a Latin letter
    digit = unicodedata.decimal(ch, None)
    if digit is not None:
        return str(digit)
    return unicodedata.normalize("NFKC", ch)


def _digits_only_token(text: str, at: int) -> bool:
    """The letters-and-digits token around `at` holds digits and O/o/I/l only."""
    token = _TOKEN.search(text, max(0, at - 64), at + 64)
    while token is not None and token.end() <= at:
        token = _TOKEN.search(text, token.end(), at + 64)
    return token is not None and token.start() <= at and bool(_DIGITISH.fullmatch(token[0]))


def _between_digits(text: str) -> View | None:
    """Separators between two digits read as one separator; None when there are none."""
    if not _BETWEEN_DIGITS.search(text):
        return None
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for m in _BETWEEN_DIGITS.finditer(text):
        a, b = m.span()
        if m.lastgroup in ("zero", "one") and not _digits_only_token(text, a):
            continue  # a letter of a word or a code (`3o4` in a base58 address)
        out.append(text[pos:a])
        starts.extend(range(pos, a))
        ends.extend(range(pos + 1, a + 1))
        out.append(_AS[m.lastgroup or "gap"])
        starts.append(a)
        ends.append(b)
        pos = b
    out.append(text[pos:])
    starts.extend(range(pos, len(text)))
    ends.extend(range(pos + 1, len(text) + 1))
    return View("".join(out), starts, ends)
