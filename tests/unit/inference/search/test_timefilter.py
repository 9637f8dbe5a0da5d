"""Time window parsing: relative and ISO 8601 bounds, and the refusals naming their field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.inference.search.timefilter import UNIT_SECONDS, parse_time, parse_window
from shared.errors import InvalidInput

NOW = 1_700_000_000.0


@pytest.mark.parametrize(("value", "expected"), [
    ("24h", NOW - 86_400), ("30m", NOW - 1_800), ("7d", NOW - 604_800), ("90s", NOW - 90),
    ("2w", NOW - 1_209_600), ("1.5h", NOW - 5_400), (" 24H ", NOW - 86_400), ("now", NOW),
    ("2023-11-14T22:13:20Z", 1_700_000_000.0),
    ("2023-11-15T00:13:20+02:00", 1_700_000_000.0),
])
def test_parses_relative_and_absolute(value: str, expected: float) -> None:
    assert parse_time(value, "since", NOW) == pytest.approx(expected)


def test_empty_is_unbounded() -> None:
    assert parse_time("", "since", NOW) is None
    assert parse_window("", "", NOW) == (None, None)


@pytest.mark.parametrize(("value", "reason"), [
    ("yesterday", "bad_time"), ("24 hours", "bad_time"), ("-5m", "bad_time"),
    ("2023-13-01T00:00:00Z", "bad_time"), ("2023-11-14T22:13:20", "naive_time"),
    ("2023-11-14", "naive_time"),
])
@pytest.mark.parametrize("field", ["since", "until"])
def test_bad_values_name_their_field(value: str, reason: str, field: str) -> None:
    args = {"since": "", "until": "", field: value}
    with pytest.raises(InvalidInput) as err:
        parse_window(args["since"], args["until"], NOW)
    assert (err.value.reason, err.value.field) == (reason, field)


def test_until_before_since_is_refused() -> None:
    with pytest.raises(InvalidInput) as err:
        parse_window("1h", "2h", NOW)
    assert (err.value.reason, err.value.field) == ("until_before_since", "until")
    assert parse_window("2h", "1h", NOW) == (NOW - 7200, NOW - 3600)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(UNIT_SECONDS)))
def test_relative_is_that_long_before_now(amount: int, unit: str) -> None:
    assert parse_time(f"{amount}{unit}", "since", NOW) == NOW - amount * UNIT_SECONDS[unit]
