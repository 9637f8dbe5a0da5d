"""AnswerStore: the least recently used entry leaves first, and none outlives the TTL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from services.inference.cache.key import CacheKey, key_for, question_text, scope_of
from services.inference.cache.store import AnswerStore, Entry
from services.inference.query import parse_params
from services.inference.settings import InferenceSettings
from shared.contract.access import Access

SETTINGS = InferenceSettings()


def key(question: str, **kw: Any) -> CacheKey:
    params = parse_params(SETTINGS, question=question, now=1_700_000_000.0, **kw)
    return key_for("query", params, encoder="m@0", config="c", exact_case=False)


def entry() -> Entry:
    return Entry(retrieval=None)  # type: ignore[arg-type]  # the store never looks inside


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_least_recently_used_entry_leaves_first() -> None:
    store = AnswerStore(2, ttl_s=60)
    store.put(key("a"), entry())
    store.put(key("b"), entry())
    assert store.get(key("a"))[0] is not None  # a is now the most recent
    store.put(key("c"), entry())
    assert len(store) == 2
    assert store.get(key("b")) == (None, False)
    assert store.get(key("a"))[0] is not None and store.get(key("c"))[0] is not None


def test_an_entry_older_than_the_ttl_is_dropped_and_reported_expired() -> None:
    clock = Clock()
    store = AnswerStore(10, ttl_s=5, clock=clock)
    store.put(key("a"), entry())
    clock.now = 5.0
    assert store.get(key("a"))[0] is not None
    clock.now = 5.1
    assert store.get(key("a")) == (None, True)
    assert store.get(key("a")) == (None, False) and len(store) == 0


def test_a_revalidated_entry_keeps_its_first_age() -> None:
    clock = Clock()
    store = AnswerStore(10, ttl_s=5, clock=clock)
    store.put(key("a"), entry())
    clock.now = 4.0
    found, _ = store.get(key("a"))
    assert found is not None
    store.put(key("a"), found, keep_age=True)
    clock.now = 5.5
    assert store.get(key("a")) == (None, True)


def test_case_and_spacing_share_a_key_everything_else_separates_them() -> None:
    assert key("Why did  the DISK fill?") == key("why did the disk fill?")
    assert question_text("Why  Disk", exact_case=True) == "Why Disk"
    base = key("q")
    others = [key("q", top_k=3), key("q", domain="ops"), key("q", source="wiki"),
              key("q", since="2024-01-01T00:00:00Z"), key("q", answer_mode="extractive"),
              key("q", temperature=0.5), key("q", max_new_tokens=5), key("q", stop=("x",)),
              key("q", access=Access.of("ann", ["payments"])), replace(base, encoder="m@1"),
              replace(base, config="d"), replace(base, call="retrieve")]
    assert all(o != base for o in others)
    assert len(set(others)) == len(others)


grants = st.frozensets(st.sampled_from(["payments", "hr", "ops", "user:ann", "user:bob"]))


@given(grants, grants)
def test_two_callers_share_a_key_only_when_they_read_the_same(a: frozenset[str],
                                                              b: frozenset[str]) -> None:
    one, two = Access.of(None, a), Access.of(None, b)
    assert (key("q", access=one) == key("q", access=two)) == (one.grants == two.grants)
    assert key("q", access=one) != key("q", access=Access.everything())


def test_a_scope_names_no_group() -> None:
    """Keys may be logged or counted: the scope is a digest, not the caller's grants."""
    scope = scope_of(Access.of("ann", ["payments"]))
    assert "payments" not in scope and "ann" not in scope and len(scope) == 32
    assert scope_of(Access.everything()) == "*"
    # The default (no caller named) reads public documents only: fail closed.
    assert key("q").scope == scope_of(Access.of(None, ()))


@given(stores=st.lists(st.tuples(st.sampled_from("abcdef"), st.floats(0, 3)), max_size=30),
       keep=st.lists(st.booleans(), max_size=30))
def test_no_entry_is_held_past_the_ttl_whether_or_not_it_is_asked_for(
        stores: list[tuple[str, float]], keep: list[bool]) -> None:
    """Entries hold their hits' texts: the text retention bounds the TTL, so an entry must
    leave at its age even if nobody asks for it again (a call for any key sweeps)."""
    clock = Clock()
    store = AnswerStore(100, ttl_s=5, clock=clock)
    for (name, step), kept in zip(stores, keep + [False] * len(stores), strict=False):
        clock.now += step
        found, _ = store.get(key(name))
        if kept and found is not None:
            store.put(key(name), found, keep_age=True)
        else:
            store.put(key(name), entry())
        assert all(clock.now - e.stored_at <= 5 for e in store._entries.values())
    clock.now += 5.01
    store.get(key("z"))  # any call
    assert len(store) == 0


def test_the_text_retention_bounds_the_answer_cache_ttl(monkeypatch: Any) -> None:
    assert InferenceSettings().answer_cache_kept_s == 300.0  # unset: the cache's own
    monkeypatch.setenv("STREAMRAG_AUDIT_TEXT_RETENTION_MS", "20000")
    assert (InferenceSettings().text_kept_s, InferenceSettings().answer_cache_kept_s) == (
        20.0, 20.0)
    monkeypatch.setenv("STREAMRAG_AUDIT_TEXT_RETENTION_MS", str(3_600_000))
    assert InferenceSettings().answer_cache_kept_s == 300.0  # the shorter of the two
