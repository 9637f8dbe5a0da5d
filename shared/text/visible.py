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
from collections.abc import Iterable
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


def then(first: View, second: View | None) -> View:
    """`second`, a view of `first.text`, as a view of the text `first` was read from."""
    if second is None or second.identical:
        return first
    if first.identical:
        return second
    starts = [first.starts[s] for s in second.starts]
    ends = [first.ends[e - 1] for e in second.ends]
    return View(second.text, starts, ends)


def edited(text: str, edits: Iterable[tuple[int, int, str]]) -> View | None:
    """`text` with each span [start, end) read as its replacement (edits sorted, disjoint).

    Every character of a replacement stands for the whole span it replaces; a span replaced
    by nothing belongs to the character before it (the one after, at the start). None when
    no edit changes anything."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos, changed, pending = 0, False, -1
    for a, b, new in edits:
        if text[a:b] == new:
            continue
        changed = True
        out.append(text[pos:a])
        starts.extend(range(pos, a))
        ends.extend(range(pos + 1, a + 1))
        if new:
            out.append(new)
            starts.extend([a] * len(new))
            ends.extend([b] * len(new))
        elif ends:
            ends[-1] = b
        elif pending < 0:
            pending = a
        pos = b
    if not changed:
        return None
    view = _ending(text, pos, out, starts, ends)
    if pending >= 0 and view.starts:
        view.starts[0] = pending
    return view


def _ending(text: str, pos: int, out: list[str], starts: list[int], ends: list[int]) -> View:
    """The view built so far, with `text[pos:]` read as itself."""
    out.append(text[pos:])
    starts.extend(range(pos, len(text)))
    ends.extend(range(pos + 1, len(text) + 1))
    return View("".join(out), starts, ends)


def reading_view(text: str) -> View:
    """What a reader sees of `text`, mapped back to it (see the module docstring)."""
    first = _characters(text) or View(text)
    return then(first, _between_digits(first.text))


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
    return _ending(text, pos, out, starts, ends)


_SCRIPT_MARK = re.compile(r"[\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
                          r"\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963]")


def _read(ch: str, before: str) -> str:
    """How one non-ASCII character reads after the view's last character `before`."""
    category = unicodedata.category(ch)
    if category == "Cf" or ch in FILLERS:
        return ""
    if category in ("Mn", "Me"):
        # A mark on a digit or a Latin letter hides it; a vowel sign of an Indic or Arabic
        # letter written apart ("م َ س ع د", "स त ी") is part of a letter-spaced word.
        if before.isspace() and _SCRIPT_MARK.match(ch):
            return ch
        return "" if before.isascii() else ch
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


_CELL_BORDER = re.compile(r"[|\u2502\u00a6\n]")
_FRAGMENT = re.compile(r"[ \t]*\d{1,4}[ \t]*")


def _split_cells(text: str, a: int, b: int) -> bool:
    """Whether the border text[a:b] cuts one number into cells: always outside a table's
    row ("card 3760 | 4876 | 4759 | 382"); in a row ("| ... |"), where the cells on both
    sides hold a few digits only ("| 4111 | 1111 | ..."), not where one holds a value of
    its own ("| +34 612 37 07 41 | 5542 1577 0659 9851 |", a row's id before a card:
    "| 2 | 5148 4394 3471 9425 |")."""
    line_start = text.rfind("\n", 0, a) + 1
    line_end = text.find("\n", b)
    line = text[line_start:line_end if line_end >= 0 else len(text)].strip()
    if not (line[:1] in "|\u2502\u00a6" and line[-1:] in "|\u2502\u00a6"):
        return True  # not a table's row: a number written with bars inside prose
    left = max((m.end() for m in _CELL_BORDER.finditer(text, max(0, a - 12), a)), default=-1)
    right = _CELL_BORDER.search(text, b, b + 12)
    return bool((left >= 0 and _FRAGMENT.fullmatch(text, left, a))
                and (right is not None and _FRAGMENT.fullmatch(text, b, right.start())))


# A line that ends in a date, a time or an address, or a record's line that begins with its
# number and a field mark after a record's line ("...,2026-09-24\n2,Park Jinho,..."): a line
# break there ends a value (not in "17,660\n487\n647\n07,Lisbon", a value cut over lines).
_ENDS_STRUCTURED = re.compile(r"(?:\d{4}-\d\d-\d\d|\d:\d\d(?::\d\d)?|\d+(?:\.\d+){3})$")
_ROW_START = re.compile(r"\d{1,6}[ \t]*[,;\t]")


def _lone(text: str, at: int) -> bool:
    """Whether the digit at `at` stands alone between spaces ("6 1 7  0 1")."""
    return (at == 0 or text[at - 1] in " \t") and (at + 1 == len(text) or text[at + 1] in " \t")


WHOLE_LINE_DIGITS = 9  # a phone's at least; a card cut over two lines has 8 on each


def _digit_count(line: str) -> int:
    return sum(c.isdigit() for c in line)


def _ends_line(text: str, a: int, b: int) -> bool:
    """Whether the line break in text[a:b] ends a value rather than cutting one."""
    if _ENDS_STRUCTURED.search(text, max(0, a - 32), a):
        return True
    line = text[text.rfind("\n", 0, a) + 1:a]  # a record itself, its fields marked
    end = text.find("\n", b)
    after = text[b:end if end >= 0 else len(text)]
    if min(_digit_count(line), _digit_count(after)) >= WHOLE_LINE_DIGITS:
        return True  # a whole number on each line ("Tel. 618 37 56 94\n612 87 72 10")
    return bool(_ROW_START.match(text, b)) and any(c in line for c in ",;\t")


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
        if m.lastgroup == "cell" and not _split_cells(text, a, b):
            continue  # two values of a table's row ("| +34 612 37 07 41 | 5542 ... |")
        if m.lastgroup == "gap" and "\n" in m[0] and _ends_line(text, a, b):
            continue  # a record's last field and the next record's number
        if m.lastgroup == "gap" and "\n" not in m[0] and _lone(text, a - 1) and _lone(text, b):
            continue  # digits written apart, two spaces between groups: read by the reader
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
