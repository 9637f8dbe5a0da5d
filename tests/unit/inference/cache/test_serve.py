"""CachedQueries: when a stored answer is served, revalidated, or made again."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from services.inference.cache.serve import EXPIRED, HIT, INVALIDATED, MISS, OFF, REVALIDATED
from tests.unit.inference.cache.world import World, view, world

DISK = "Why did the disk fill?"


def run(in_process: bool, body: Callable[[World], Awaitable[None]], **kw: object) -> None:
    async def go() -> None:
        async with world(in_process, **kw) as w:  # type: ignore[arg-type]
            w.index.upsert("d0", "The broker disk filled with old logs.")
            w.index.upsert("d1", "Lunch was late again.")
            w.index.upsert("d2", "Rotating the logs freed the disk.")
            await body(w)
    asyncio.run(go())


def outcomes(w: World) -> dict[str, float]:
    m = w.cached.metrics
    return {o: m.sample("streamrag_inference_answer_cache_total",
                        {"call": "query", "outcome": o})
            for o in (HIT, REVALIDATED, MISS, EXPIRED, INVALIDATED)}


def test_in_process_a_repeated_question_is_served_without_a_search() -> None:
    async def body(w: World) -> None:
        first, answer = await w.ask(DISK)
        again, cached = await w.ask("why did  the DISK fill?")
        assert (first.outcome, again.outcome) == (MISS, HIT)
        assert view(again.retrieval, cached) == view(first.retrieval, answer)
        assert again.retrieval.retrieval_ms == 0.0 and cached.answer_ms == 0.0
        assert outcomes(w)[HIT] == 1 and outcomes(w)[MISS] == 1
    run(True, body)


def test_an_update_of_a_cited_document_is_never_served_stale() -> None:
    async def body(w: World) -> None:
        await w.ask(DISK)
        w.index.upsert("d0", "The broker disk filled because retention was a year.")
        found, answer = await w.ask(DISK)
        assert found.outcome == INVALIDATED
        # The citations carry the updated text (the quote is whatever the fresh answer is).
        assert any("retention was a year" in h.text for h in found.retrieval.result.hits)
        assert view(found.retrieval, answer) == view(*await w.truth(DISK))
    run(True, body)


def test_a_new_document_that_now_ranks_first_invalidates_too() -> None:
    async def body(w: World) -> None:
        await w.ask(DISK)
        w.index.upsert("d3", "Why did the disk fill? The disk did fill.")  # uncited so far
        found, answer = await w.ask(DISK)
        assert found.outcome == INVALIDATED
        assert found.retrieval.result.hits[0].doc_id == "d3"
    run(True, body)


def test_an_update_elsewhere_costs_a_search_but_keeps_the_answer() -> None:
    async def body(w: World) -> None:
        _, answer = await w.ask(DISK)
        w.index.upsert("d1", "Lunch was on time.")  # not in this question's top 2
        found, cached = await w.ask(DISK)
        assert found.outcome == REVALIDATED and cached.text == answer.text
        assert (await w.ask(DISK))[0].outcome == HIT  # current at the new generation
    run(True, body)


@pytest.mark.parametrize("in_process", [True, False])
def test_a_deleted_document_leaves_the_answer(in_process: bool) -> None:
    async def body(w: World) -> None:
        await w.ask(DISK)
        w.index.delete("d0")
        found, answer = await w.ask(DISK)
        assert found.outcome == INVALIDATED
        assert "d0" not in {h.doc_id for h in found.retrieval.result.hits}
        assert view(found.retrieval, answer) == view(*await w.truth(DISK))
    run(in_process, body)


def test_by_broker_a_repeat_is_revalidated_by_a_search() -> None:
    async def body(w: World) -> None:
        first, answer = await w.ask(DISK)
        again, cached = await w.ask(DISK)
        assert (first.outcome, again.outcome) == (MISS, REVALIDATED)
        assert cached.text == answer.text and cached.answer_ms == 0.0
    run(False, body)


def test_a_click_that_reorders_the_hits_is_not_served_from_the_cache() -> None:
    async def body(w: World) -> None:
        first, _ = await w.ask(DISK)
        second = first.retrieval.result.hits[1].chunk_id
        w.clicks.clicks[second] = 10  # the boost (capped at 0.2) lifts it above the first
        found, answer = await w.ask(DISK)
        assert found.outcome == INVALIDATED
        assert found.retrieval.result.hits[0].chunk_id == second
        assert view(found.retrieval, answer) == view(*await w.truth(DISK))
    run(True, body)


def test_an_entry_past_its_ttl_is_made_again() -> None:
    async def body(w: World) -> None:
        await w.ask(DISK)
        w.clock[0] = 31.0
        assert (await w.ask(DISK))[0].outcome == EXPIRED
        assert (await w.ask(DISK))[0].outcome == HIT
    run(True, body, ttl_s=30.0)


def test_the_cache_turned_off_answers_every_call_afresh() -> None:
    async def body(w: World) -> None:
        assert [(await w.ask(DISK))[0].outcome for _ in range(2)] == [OFF, OFF]
        assert len(w.cached.store) == 0
    run(True, body, answer_cache=False)


def test_an_encoder_switch_keeps_no_old_answer() -> None:
    async def body(w: World) -> None:
        await w.ask(DISK)
        w.cached.engine.encoder_epoch += 1  # as switch_encoder does
        assert (await w.ask(DISK))[0].outcome == MISS
    run(True, body)
