"""Untrusted bytes to a JSON object, refusing what would make parsing expensive or unsafe.

Python's json raises RecursionError on deep nesting and ValueError on integers past its
digit limit, turns 1e999 into inf and accepts NaN, Infinity and lone surrogate escapes
(\\ud800). Each of these becomes an InvalidInput with its own reason here: size and UTF-8
first, then nesting depth and digit runs from a scan of the raw text (before the parser
sees it), then constants and float overflow while parsing, then every string (keys too)
checked for surrogates. A key given twice in one object is refused (`duplicate_key`):
parsers disagree on which one wins (Python's takes the last), so the record means
different things to different readers.

Errors name a field by its path only through keys of the documented schema; any other key
is the record's own text and is named by position (`metadata[#2]`), so a key that is
itself personal data never reaches a dead letter's field or a log line.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from shared.errors import InvalidInput

# A JSON string literal; possessive, so a long or unterminated one cannot backtrack.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_PLAIN_PATH = re.compile(r"[\w.\[\]#-]{1,100}", re.ASCII)  # named in errors only if plain
# Keys that errors may name: the documented input shapes' own.
SCHEMA_KEYS = frozenset({
    "id", "text", "title", "source", "domain", "metadata", "event_time", "op",
    "schema_version", "payload", "before", "after", "ts_ms", "db", "table", "deleted",
    "acl"})


def load_object(value: bytes | None, *, max_bytes: int, max_depth: int,
                max_digits: int) -> dict[str, Any]:
    """The JSON object in `value`, or InvalidInput with a reason naming what is wrong."""
    if value is None or len(value) == 0:
        raise InvalidInput("empty_value", detail="record has no value")
    if len(value) > max_bytes:
        raise InvalidInput("payload_too_large", detail=f"{len(value)} bytes > {max_bytes}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("not_utf8", detail=f"invalid byte at {exc.start}") from exc
    _prescan(text, max_depth, max_digits)
    try:
        obj = json.loads(text, parse_constant=_constant, parse_float=_float,
                         object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        msg = f"line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise InvalidInput("malformed_json", detail=msg) from exc
    except RecursionError as exc:  # the prescan bounds depth; this is the backstop
        raise InvalidInput("too_deep", detail="JSON nested too deeply") from exc
    if not isinstance(obj, dict):
        raise InvalidInput("not_an_object", detail=f"top level is {type(obj).__name__}")
    _check_strings(obj)
    return obj


def _prescan(text: str, max_depth: int, max_digits: int) -> None:
    """Depth and digit runs outside string literals, without parsing."""
    bare = _STRING.sub('""', text)
    if re.search(rf"\d{{{max_digits + 1}}}", bare):
        raise InvalidInput("number_too_large", detail=f"a number has more than {max_digits} "
                           "digits")
    depth = 0
    for bracket in _BRACKETS.findall(bare):
        depth += 1 if bracket in "[{" else -1
        if depth > max_depth:
            raise InvalidInput("too_deep", detail=f"nesting deeper than {max_depth}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise InvalidInput("duplicate_key", detail="a key appears twice in one object")
    return out


def _constant(name: str) -> float:
    raise InvalidInput("non_finite_number", detail=f"{name} is not a JSON number")


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise InvalidInput("number_too_large", detail="a number overflows a double")
    return value


def _scalar_values(text: str) -> bool:
    """No lone surrogates (encoding is far faster than a regex over a long text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_strings(obj: Any, path: str = "") -> None:
    """Every key and string value is valid Unicode scalar values (no lone surrogates)."""
    if isinstance(obj, str):
        if not _scalar_values(obj):
            field = path if _PLAIN_PATH.fullmatch(path) else None
            raise InvalidInput("invalid_unicode", field, "lone surrogate escape")
    elif isinstance(obj, dict):
        for i, (key, value) in enumerate(obj.items()):
            name = key if key in SCHEMA_KEYS else f"[#{i}]"
            where = f"{path}.{name}" if path and key in SCHEMA_KEYS else f"{path}{name}"
            if not _scalar_values(key):
                field = path if _PLAIN_PATH.fullmatch(path) else None
                raise InvalidInput("invalid_unicode", field, "lone surrogate in a key")
            _check_strings(value, where)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            _check_strings(value, f"{path}[{i}]")
