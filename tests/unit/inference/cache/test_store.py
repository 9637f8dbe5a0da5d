"""AnswerStore: the least recently used entry leaves first, and none outlives the TTL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from services.inference.cache.key import CacheKey, key_for, question_text, scope_of
from services.inference.cache.store import AnswerStore, Entry
from services.inference.query import parse_params
from services.inference.settings import InferenceSettings

SETTINGS = InferenceSettings()


def key(question: str, **kw: Any) -> CacheKey:
    params = parse_params(SETTINGS, question=question, now=1_700_000_000.0, **kw)
    return key_for("query", params, scope="", encoder="m@0", config="c", exact_case=False)


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
              replace(base, scope=scope_of("Bearer t")), replace(base, encoder="m@1"),
              replace(base, config="d"), replace(base, call="retrieve")]
    assert all(o != base for o in others)
    assert len(set(others)) == len(others)


def test_a_scope_never_holds_the_credential() -> None:
    assert scope_of("") == ""
    assert "secret" not in scope_of("Bearer secret")
    assert scope_of("Bearer a") != scope_of("Bearer b")
