"""Hypothesis strategies for hostile docs.raw.v1 records, shared by unit and integration tests.

A record is (value, key, headers). Values are arbitrary bytes; arbitrary JSON with deep
nesting, huge numbers, NaN/Infinity, lone surrogates (escaped, or as invalid UTF-8); and
each of the three input shapes (plain, Debezium, API mapping) with wrong values put into
its fields. Some records are valid, so acceptance is exercised too.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

Headers = list[tuple[str, bytes]]
Raw = tuple[bytes | None, bytes | None, Headers]
SOURCE_HEADER = "streamrag-source"

_text = st.text(max_size=40)
_surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_nasty_text = st.one_of(
    _text, st.text(st.characters(codec="utf-8"), max_size=20),
    st.builds(lambda a, s, b: a + s + b, _text, _surrogate, _text),
    st.sampled_from(["", " ", "\x00", "a\x07b", "\u200b", "\ufeff", "x" * 600, "\n\t"]),
)
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**39, max_value=10**80),
    st.floats(allow_nan=True, allow_infinity=True), _nasty_text,
    st.sampled_from([1e16, -1e13, 1.0, 1e300, -0.0, 253402300800, 1_700_000_000_000]),
)
_json = st.recursive(_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_nasty_text, inner, max_size=4)), max_leaves=12)
_times = st.one_of(_scalar, st.sampled_from([
    "2026-11-28T14:05:00Z", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59Z",
    "2026-01-01T00:00:00", "1969-12-31T23:59:59Z", "2100-01-01T00:00:00Z", "yesterday"]))


def _valid_plain(tag: str, n: int) -> dict[str, Any]:
    return {"id": f"{tag}-plain-{n}", "text": f"Hostile test document {n} about lighthouses.",
            "source": tag, "event_time": "2026-11-28T14:05:00Z", "metadata": {"n": n}}


def _valid_cdc(tag: str, n: int) -> dict[str, Any]:
    row = {"id": f"{tag}-cdc-{n}", "title": "T", "body": f"Change event body {n}."}
    return {"payload": {"op": "c", "before": None, "after": row,
                        "source": {"db": tag, "table": "t"}, "ts_ms": 1_795_780_800_000}}


def _valid_api(tag: str, n: int) -> dict[str, Any]:
    return {"ticket": {"id": f"{tag}-api-{n}", "subject": "S", "description": f"Ticket {n}.",
                       "priority": "high", "updated_at": "2026-11-28T13:30:00Z"}}


_SHAPES = {"plain": _valid_plain, "cdc": _valid_cdc, "api": _valid_api}
_FIELDS = {
    "plain": [("id",), ("text",), ("source",), ("title",), ("domain",), ("event_time",),
              ("metadata",), ("schema_version",), ("op",)],
    "cdc": [("payload", "op"), ("payload", "after"), ("payload", "after", "id"),
            ("payload", "after", "body"), ("payload", "after", "title"), ("payload", "ts_ms"),
            ("payload", "source"), ("payload", "source", "table"), ("payload", "before")],
    "api": [("ticket",), ("ticket", "id"), ("ticket", "description"), ("ticket", "subject"),
            ("ticket", "updated_at"), ("ticket", "priority"), ("deleted",), ("op",)],
}


def _put(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        if not isinstance(obj.get(part), dict):
            obj[part] = {}
        obj = obj[part]
    obj[path[-1]] = value


def _dumps(obj: Any, ascii_only: bool) -> bytes:
    # Lone surrogates: escaped (ascii) or written raw, which is invalid UTF-8.
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def shaped(draw: st.DrawFn, tag: str) -> tuple[bytes, Headers]:
    """One of the three shapes, valid or with hostile values in some of its fields."""
    shape = draw(st.sampled_from(sorted(_SHAPES)))
    obj = _SHAPES[shape](tag, draw(st.integers(0, 10**6)))
    for path in draw(st.lists(st.sampled_from(_FIELDS[shape]), max_size=2, unique=True)):
        value = draw(_times if path[-1] in ("event_time", "ts_ms", "updated_at") else _json)
        _put(obj, path, value)
    headers: Headers = [(SOURCE_HEADER, b"tickets")] if shape == "api" else []
    return _dumps(obj, draw(st.booleans())), headers


def _nested(depth: int, opener: str) -> bytes:
    closer = {"[": "]", '{"a":': "}"}[opener]
    return (opener * depth + "1" + closer * depth).encode()


_headers = st.lists(st.tuples(st.sampled_from([SOURCE_HEADER, "x-other", ""]),
                              st.one_of(st.binary(max_size=8),
                                        st.sampled_from([b"tickets", b"nobody", b"\xff\xfe"]))),
                    max_size=2)


@st.composite
def hostile_record(draw: st.DrawFn, tag: str = "hostile") -> Raw:
    """One raw record: (value, key, headers)."""
    kind = draw(st.sampled_from(["bytes", "json", "nested", "digits", "constant", "shaped",
                                 "shaped", "shaped"]))
    headers: Headers = []
    if kind == "bytes":
        value: bytes | None = draw(st.one_of(st.none(), st.binary(max_size=64)))
    elif kind == "json":
        value = _dumps(draw(_json), draw(st.booleans()))
    elif kind == "nested":
        value = _nested(draw(st.integers(1, 5000)), draw(st.sampled_from(["[", '{"a":'])))
    elif kind == "digits":
        digits = "9" * draw(st.integers(20, 6000))
        value = draw(st.sampled_from([f'{{"id": {digits}, "text": "t", "source": "s"}}',
                                      f'{{"id": "a", "text": "t", "source": "s", '
                                      f'"event_time": {digits}}}'])).encode()
    elif kind == "constant":
        value = draw(st.sampled_from([b'{"id": "a", "text": "t", "source": "s", '
                                      b'"event_time": NaN}', b'{"x": Infinity}',
                                      b'{"x": -Infinity}', b'{"x": 1e999}']))
    else:
        value, headers = draw(shaped(tag))
    if draw(st.integers(0, 9)) == 0:
        headers = draw(_headers)
    key = draw(st.one_of(st.none(), st.binary(max_size=16)))
    return value, key, headers


def draw_records(n: int, at_seed: int, tag: str) -> list[Raw]:
    """n hostile records drawn by hypothesis, reproducibly (for the integration test)."""
    out: list[Raw] = []

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @seed(at_seed)
    @given(hostile_record(tag))
    def collect(record: Raw) -> None:
        out.append(record)

    collect()
    return out
