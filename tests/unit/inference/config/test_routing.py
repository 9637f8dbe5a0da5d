"""Routing among variants: deterministic, weights honoured, little moved when weights change."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from services.inference.config.routing import route

IDS = [f"client-{i}" for i in range(20_000)]


@given(st.text(max_size=40), st.text(min_size=1, max_size=80),
       st.dictionaries(st.sampled_from(["a", "b", "c", "stable", "canary"]),
                       st.integers(1, 100), min_size=1))
def test_the_same_caller_and_question_always_get_the_same_variant(
        caller: str, question: str, weights: dict[str, int]) -> None:
    first = route(weights, caller, question)
    assert first in weights
    assert route(dict(reversed(list(weights.items()))), caller, question) == first
    # Case and spacing of the question do not matter: the question is normalised.
    assert route(weights, caller, "  " + question.upper() + " ") == route(
        weights, caller, question.upper())


def test_no_variants_routes_to_none() -> None:
    assert route({}, "me", "why?") == ""


def test_weights_are_honoured_within_binomial_bounds() -> None:
    weights = {"stable": 95, "canary": 5}
    canary = sum(route(weights, cid, "what is the refund policy?") == "canary" for cid in IDS)
    n, p = len(IDS), 0.05
    sd = math.sqrt(n * p * (1 - p))
    assert abs(canary - n * p) < 4 * sd, canary


def test_a_zero_weight_variant_gets_nothing() -> None:
    weights = {"stable": 10, "off": 0}
    assert all(route(weights, cid, "q") == "stable" for cid in IDS[:2000])


def test_changing_two_weights_moves_only_the_share_that_must_move() -> None:
    before = {cid: route({"stable": 95, "canary": 5}, cid, "q") for cid in IDS}
    after = {cid: route({"stable": 90, "canary": 10}, cid, "q") for cid in IDS}
    moved = [cid for cid in IDS if before[cid] != after[cid]]
    # Every move is stable -> canary, none back, and about 5% of callers move.
    assert all(before[c] == "stable" and after[c] == "canary" for c in moved)
    assert all(after[c] == "canary" for c in IDS if before[c] == "canary")
    sd = math.sqrt(len(IDS) * 0.05 * 0.95)
    assert abs(len(moved) - 0.05 * len(IDS)) < 4 * sd
