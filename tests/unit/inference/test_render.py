"""Stored values a citation cannot show are emptied and named, never raised."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from services.inference.api import convert
from services.inference.render import clean_hit, iso
from shared.contract.records import SearchHit
from tests.unit.inference.fakes import hit


def test_an_event_time_out_of_range_is_emptied_and_named() -> None:
    for ts in (1e16, -1e13, 1e308, math.inf, -math.inf, math.nan):
        clean, fields = clean_hit(hit("c", 0.5).model_copy(update={"event_time": ts}))
        assert fields == ("event_time",), ts
        citation = convert.citation(clean)
        assert citation.event_time_iso == "" and citation.text == "text of c"
        assert math.isnan(citation.event_time) if math.isnan(ts) else citation.event_time == ts
    assert iso(1e16) == "" and iso(math.nan) == ""


def test_the_edges_of_datetime_still_render() -> None:
    assert iso(-62135596800.0) == "0001-01-01T00:00:00Z"  # year 1 is representable
    assert iso(253402300799.0) == "9999-12-31T23:59:59Z"
    assert clean_hit(hit("c", 0.5).model_copy(update={"event_time": 253402300799.0}))[1] == ()


def test_invalid_unicode_and_a_huge_version_are_emptied() -> None:
    bad = hit("c\ud800", 0.5, "fine text").model_copy(
        update={"title": "t\udfff", "version": 2**70})
    clean, fields = clean_hit(bad)
    assert fields == ("chunk_id", "title", "version")
    assert (clean.chunk_id, clean.title, clean.version, clean.text) == ("", "", 0, "fine text")
    convert.citation(clean).SerializeToString()  # would raise for the original


def test_a_clean_hit_is_returned_as_is() -> None:
    h = hit("c", 0.5)
    assert clean_hit(h) == (h, ())
    assert clean_hit(h)[0] is h


TEXT = st.text(st.characters(codec=None), max_size=20)  # surrogates included


@given(event_time=st.floats(allow_nan=True, allow_infinity=True), text=TEXT, title=TEXT,
       version=st.integers(min_value=-(2**80), max_value=2**80))
def test_any_stored_values_render_to_a_serialisable_citation(
        event_time: float, text: str, title: str, version: int) -> None:
    stored = SearchHit(chunk_id="c", doc_id="d", version=version, score=0.1,
                       event_time=event_time, text=text, title=title, domain="x", source="s")
    clean, fields = clean_hit(stored)
    citation = convert.citation(clean)
    citation.SerializeToString()
    assert ("event_time" in fields) == (citation.event_time_iso == "")
    assert set(fields) <= {"event_time", "text", "title", "version"}
