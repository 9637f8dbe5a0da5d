"""ServedChunks: what a scope was shown, for the feedback window, and within its capacity."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.inference.search.served import Receipts, ServedChunks


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


KEY = b"k" * 32


def test_a_receipt_proves_its_scope_and_chunk_until_it_expires() -> None:
    now = [1_000.0]
    receipts = Receipts(KEY, ttl_s=60, clock=lambda: now[0])
    r = receipts.issue("payments", "c1")
    assert receipts.valid("payments", "c1", r)
    assert Receipts(KEY, ttl_s=60, clock=lambda: now[0]).valid("payments", "c1", r)  # a replica
    assert not receipts.valid("hr", "c1", r)  # another caller scope
    assert not receipts.valid("payments", "c2", r)  # another chunk
    assert not Receipts(b"x" * 32, ttl_s=60, clock=lambda: now[0]).valid("payments", "c1", r)
    now[0] = 1_060.0
    assert receipts.valid("payments", "c1", r)
    now[0] = 1_061.0
    assert not receipts.valid("payments", "c1", r)  # expired


def test_a_receipt_names_neither_caller_nor_chunk() -> None:
    r = Receipts(KEY, clock=lambda: 0.0).issue("user:ann@example.com,payments", "doc-7#v1#0")
    assert "ann" not in r and "payments" not in r and "doc-7" not in r


@given(st.text(max_size=80) | st.builds("v1.{}.{}".format, st.text(max_size=20),
                                        st.text(max_size=50)))
def test_no_string_but_an_issued_receipt_is_valid(forged: str) -> None:
    receipts = Receipts(KEY, clock=lambda: 0.0)
    assert not receipts.valid("payments", "c1", forged)  # refused, never raised


def test_an_expiry_of_other_digits_is_refused_not_raised() -> None:
    receipts = Receipts(KEY, clock=lambda: 0.0)
    for expiry in ("\u00b2", "\u0663", "9" * 40, "-1", " 1", ""):
        assert not receipts.valid("payments", "c1", f"v1.{expiry}.AAAA")


@given(st.integers(0, 2), st.integers(0, 42), st.characters(codec="ascii"))
def test_a_receipt_with_one_character_changed_is_refused(part: int, at: int, ch: str) -> None:
    receipts = Receipts(KEY, clock=lambda: 0.0)
    pieces = receipts.issue("payments", "c1").split(".")
    changed = pieces[part][:at] + ch + pieces[part][at + 1:]
    forged = ".".join([*pieces[:part], changed, *pieces[part + 1:]])
    assert receipts.valid("payments", "c1", forged) == (forged == ".".join(pieces))


def test_an_expiry_pushed_past_the_window_is_refused_even_with_a_fresh_mac() -> None:
    # A receipt from a clock (or a key holder) far ahead would outlive the feedback window.
    ahead = Receipts(KEY, ttl_s=60, clock=lambda: 10_000.0).issue("payments", "c1")
    assert not Receipts(KEY, ttl_s=60, clock=lambda: 0.0).valid("payments", "c1", ahead)
