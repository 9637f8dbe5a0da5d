"""Units a chunk must not cut: fenced code, pipe tables, list items and JSON objects.

Each finder returns (start, end) character spans; a unit's span includes its trailing
newline so the line cut right after it stays allowed. JSON member separators are the
cut points an oversized object is split along.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

Span = tuple[int, int]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_LIST_MARKER = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
_JSON = json.JSONDecoder()


def units(text: str) -> list[Span]:
    """Every unit that should stay whole, nested ones included, in no particular order."""
    fences = [m.span() for m in FENCE.finditer(text)]
    return fences + tables(text) + list_items(text) + json_objects(text)


def _lines(text: str) -> list[Span]:
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        out.append((pos, pos + len(line)))
        pos += len(line)
    return out


def tables(text: str) -> list[Span]:
    """Runs of 2+ non-blank lines holding `|` with a delimiter row, or all starting with `|`."""
    lines, out, i = _lines(text), [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and "|" in text[slice(*lines[j])] and text[slice(*lines[j])].strip():
            j += 1
        run = [text[slice(*lines[k])] for k in range(i, j)]
        if len(run) >= 2 and (any(_DELIMITER_ROW.match(r) for r in run[1:])
                              or all(r.lstrip().startswith("|") for r in run)):
            out.append((lines[i][0], lines[j - 1][1]))
        i = max(j, i + 1)
    return out


def list_items(text: str) -> list[Span]:
    """A marker line plus its continuation lines, nested items and indented paragraphs."""
    lines, out = _lines(text), []
    for i, (start, end) in enumerate(lines):
        marker = _LIST_MARKER.match(text[start:end])
        if marker:
            out.append((start, lines[_item_last_line(text, lines, i, len(marker[1]))][1]))
    return out


def _item_last_line(text: str, lines: list[Span], i: int, indent: int) -> int:
    last, blank = i, False
    for k in range(i + 1, len(lines)):
        line = text[slice(*lines[k])]
        if not line.strip():
            blank = True
            continue
        own_indent = len(line) - len(line.lstrip(" \t"))
        if own_indent <= indent and (blank or _LIST_MARKER.match(line)):
            break  # a sibling item, or text after a blank line that is not indented into us
        last, blank = k, False
    return last


def json_objects(text: str) -> list[Span]:
    """Spans of every JSON object in the text (nested ones too) that parses on its own."""
    out = []
    for m in re.finditer(r"\{", text):
        try:
            value, end = _JSON.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append((m.start(), end))
    return out


def json_member_cuts(text: str, objects: list[Span]) -> list[int]:
    """Positions just after each `,` (and its whitespace) between JSON members or elements."""
    cuts: set[int] = set()
    for a, b in _outermost(objects):
        cuts.update(_separators(text, a, b))
    return sorted(cuts)


def _outermost(spans: list[Span]) -> Iterator[Span]:
    end = -1
    for a, b in sorted(spans):
        if a >= end:
            end = b
            yield a, b


def _separators(text: str, a: int, b: int) -> Iterator[int]:
    in_string = escaped = False
    for i in range(a, b):
        ch = text[i]
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch == ",":
            j = i + 1
            while j < b and text[j] in " \t\r\n":
                j += 1
            yield j
