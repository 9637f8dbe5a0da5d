"""Stream-statistics keys, rows and the instant a Stats call may read."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.inference.errors import OutOfRangeError
from services.inference.telemetry.streamstats import (
    StatRow,
    check_filter,
    rows,
    split_key,
    stat_key,
    window_instant,
)
from shared.errors import InvalidInput

NOW = 1_800_000_000.0


@given(st.text(), st.text(), st.text())
def test_any_names_round_trip_through_the_key(source: str, domain: str, kind: str) -> None:
    assert split_key(stat_key(source, domain, kind)) == (source, domain, kind)


def test_rows_are_sorted_filtered_and_zero_counts_left_out() -> None:
    items = [(stat_key("b", "d", "new"), 2), (stat_key("a", "d", "received"), 5),
             (stat_key("a", "e", "new"), 0), (stat_key("a", "d|x", "new"), 1)]
    assert rows(items) == [StatRow("a", "d", "received", 5), StatRow("a", "d|x", "new", 1),
                           StatRow("b", "d", "new", 2)]
    assert rows(items, source="a", domain="d") == [StatRow("a", "d", "received", 5)]


def test_window_instant_now_past_future_and_too_old() -> None:
    assert window_instant(0.0, NOW, 3600) == NOW
    assert window_instant(NOW - 10, NOW, 3600) == NOW - 10
    for bad in (NOW + 60, -1.0, math.nan):
        with pytest.raises(InvalidInput) as raised:
            window_instant(bad, NOW, 3600)
        assert raised.value.field == "at" and not isinstance(raised.value, OutOfRangeError)
    with pytest.raises(OutOfRangeError) as old:
        window_instant(NOW - 3601, NOW, 3600)
    assert (old.value.reason, old.value.field) == ("before_retention", "at")


def test_a_filter_longer_than_any_name_is_refused() -> None:
    assert check_filter("crm", "source") == "crm"
    with pytest.raises(InvalidInput) as raised:
        check_filter("x" * 513, "domain")
    assert raised.value.field == "domain"
