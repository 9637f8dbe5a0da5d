"""Units that must stay whole: pipe tables, list items, JSON objects, and how big ones split."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from services.chunking.chunker import chunk_spans
from services.chunking.documents import DocumentChunker
from services.chunking.structure import json_member_cuts, json_objects, list_items, tables
from shared.encoder.model import load_tokenizer

CHUNKER = DocumentChunker(load_tokenizer(), max_tokens=48)
BUDGET = 48

words = st.sampled_from(["alpha", "beta", "gamma", "payments", "Kafka", "42", "end.", "clause,"])
# No paragraph breaks: the cut before a unit must not always win by strength alone.
seps = st.sampled_from([" ", " ", "\n", ". ", ", "])
prose = st.lists(st.tuples(words, seps), min_size=0, max_size=120).map(
    lambda parts: "".join(w + s for w, s in parts))

TABLE = "| service | p99 ms | owner |\n|---|---:|---|\n| checkout | 420 | web |\n" \
        "| billing | 95 | pay |\n"
LIST_ITEM = "- restart the billing worker, then\n  drain the queue and verify the lag, and\n" \
            "  page the owner if it grows again\n"
JSON_OBJ = '{"service": "checkout", "p99_ms": 420, "tags": ["web", "edge"], "ok": false}'
PRETTY_JSON = json.dumps({"incident": 42, "cause": {"disk": "full", "node": "b7"},
                          "actions": ["rotate", "page"]}, indent=2)
UNITS = {"table": TABLE, "list item": LIST_ITEM, "json": JSON_OBJ, "pretty json": PRETTY_JSON}


def cuts_of(text: str, budget: int = BUDGET) -> list[int]:
    return [end for _, end in chunk_spans(text, CHUNKER.offsets(text), budget)[:-1]]


def test_finders_see_each_unit_exactly() -> None:
    text = "intro\n\n" + TABLE + "\n" + LIST_ITEM + "- second item\n\nafter " + JSON_OBJ
    (t,) = tables(text)
    assert text[slice(*t)] == TABLE
    first, second = list_items(text)
    assert text[slice(*first)] == LIST_ITEM and text[slice(*second)] == "- second item\n"
    (j,) = json_objects(text)
    assert text[slice(*j)] == JSON_OBJ


def test_nested_list_items_belong_to_their_parent() -> None:
    text = "- parent\n  - child one\n  - child two\n- sibling\n"
    spans = sorted(list_items(text))
    assert [text[slice(*s)] for s in spans] == [
        "- parent\n  - child one\n  - child two\n", "  - child one\n", "  - child two\n",
        "- sibling\n"]


@settings(max_examples=40, deadline=None)
@given(prose, prose, st.sampled_from(sorted(UNITS)))
def test_no_cut_inside_a_unit_that_fits(before: str, after: str, kind: str) -> None:
    unit = UNITS[kind]
    assert CHUNKER.count(unit) <= BUDGET
    text = before + "\n" + unit + "\n" + after
    a = len(before) + 1
    b = a + len(unit)
    assert not [c for c in cuts_of(text) if a < c < b]


def test_an_oversized_json_object_splits_between_members_and_keeps_nested_ones() -> None:
    inner = {"host": "db-7", "disk": "full"}
    doc = {f"key{i}": f"value number {i} of the incident record" for i in range(30)}
    doc["nested"] = inner
    for text in (json.dumps(doc), json.dumps(doc, indent=2)):
        assert CHUNKER.count(text) > 4 * BUDGET
        members = set(json_member_cuts(text, json_objects(text)))
        cuts = cuts_of(text)
        assert cuts and all(c in members or text[c - 1] == "\n" for c in cuts)
        nested = text.index('{"host"') if '{"host"' in text else text.index("{\n    \"host\"")
        end = text.index("}", nested) + 1
        assert not [c for c in cuts if nested < c < end]


def test_an_oversized_table_splits_between_rows() -> None:
    rows = "".join(f"| svc-{i} | {i * 7} ms | team {i} |\n" for i in range(60))
    text = "| service | latency | owner |\n|---|---|---|\n" + rows
    cuts = cuts_of(text)
    assert len(cuts) >= 3
    assert all(text[c - 1] == "\n" for c in cuts)


def test_braces_that_are_not_json_are_not_units() -> None:
    assert json_objects("if (x) { return y; } and {not: json}") == []
    assert json_member_cuts('{"a": "x, y", "b": 1}', [(0, 21)]) == [14]
