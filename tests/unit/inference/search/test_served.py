"""ServedChunks: what a scope was shown, for the feedback window, and within its capacity."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.inference.search.served import ServedChunks


def test_a_chunk_is_shown_to_its_scope_only_and_for_the_window_only() -> None:
    now = [0.0]
    served = ServedChunks(10, ttl_s=60, clock=lambda: now[0])
    served.record("payments", ["c1", "c2"])
    assert served.shown("payments", "c1") and not served.shown("hr", "c1")
    assert not served.shown("payments", "c3")
    now[0] = 60.0
    assert served.shown("payments", "c2")
    now[0] = 60.5
    assert not served.shown("payments", "c2")
    served.record("payments", ["c2"])  # shown again: a new window
    assert served.shown("payments", "c2")


@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 20)), max_size=60),
       st.integers(1, 8))
def test_the_most_recently_shown_stay_within_capacity(shows: list[tuple[str, int]],
                                                      capacity: int) -> None:
    served = ServedChunks(capacity, ttl_s=1e9, clock=lambda: 0.0)
    for scope, chunk in shows:
        served.record(scope, [str(chunk)])
    assert len(served) <= capacity
    recent: list[tuple[str, str]] = []
    for scope, chunk in reversed(shows):
        if (scope, str(chunk)) not in recent:
            recent.append((scope, str(chunk)))
    kept = recent[:capacity]
    assert all(served.shown(s, c) for s, c in kept)
    assert not any(served.shown(s, c) for s, c in recent[capacity:])
