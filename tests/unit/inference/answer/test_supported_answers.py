"""A generated answer is served only where its sources hold what it says: one with a number,
name or quoted term that no cited passage holds is replaced by the extractive answer, and
`auto` judges a call without a deadline against the default one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import TAMARIN_CHUNKS, FakeSearch, ScriptedGenerator
from tests.unit.inference.serving import serving, stub


def ask(text: str, question: str = "how long does Tamarin keep cached pages?",
        estimate_s: float = 0.5, **settings: Any) -> pb.QueryResponse:
    async def go() -> pb.QueryResponse:
        async with serving(FakeSearch(TAMARIN_CHUNKS), **settings) as (runtime, channel):
            runtime.engine.generative = ScriptedGenerator(text, estimate_s)
            return await stub(channel).Query(pb.QueryRequest(question=question))
    return asyncio.run(go())


@pytest.mark.parametrize("wrong", [
    "Tamarin keeps cached pages for 30 days before eviction.",  # the number changed
    "Tamarin keeps cached pages for 35 days under its Lazy Eviction Policy.",  # invented name
    "The Osprey gateway keeps cached pages for 35 days.",  # one passage's name, another's fact
])
def test_a_generated_answer_its_sources_do_not_hold_is_replaced_by_the_extractive_one(
        wrong: str) -> None:
    reply = ask(wrong)
    assert reply.answer_mode == "extractive" and reply.answer_mode_reason.startswith(
        "unsupported: 0% of the generated answer's sentences")
    assert wrong not in reply.answer and "35 days" in reply.answer  # the source, quoted
    assert reply.citation_check.supported_share == 1.0


def test_a_grounded_generated_answer_is_served_as_written() -> None:
    right = "Tamarin keeps cached pages for 35 days before eviction [1]."
    reply = ask(right)
    assert (reply.answer, reply.answer_mode, reply.answer_mode_reason) == (
        right, "generative", "fits")
    assert reply.citation_check.supported_share == 1.0


def test_a_threshold_of_zero_serves_even_an_unsupported_answer() -> None:
    wrong = "Tamarin keeps cached pages for 30 days before eviction."
    reply = ask(wrong, generation_min_support=0.0)
    assert (reply.answer, reply.answer_mode) == (wrong, "generative")
    assert reply.citation_check.supported_share == 0.0


def test_auto_without_a_deadline_quotes_when_generation_would_outlast_the_default() -> None:
    right = "Tamarin keeps cached pages for 35 days before eviction [1]."
    slow = ask(right, estimate_s=45.0)  # the default: 30 s
    assert (slow.answer_mode, slow.answer_mode_reason) == ("extractive", "deadline")
    fast = ask(right, estimate_s=45.0, auto_deadline_ms=60_000, auto_latency_objective_ms=0)
    assert (fast.answer_mode, fast.answer_mode_reason) == ("generative", "fits")
