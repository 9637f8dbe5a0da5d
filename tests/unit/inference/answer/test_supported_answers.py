"""A generated answer is served only where its sources hold what it says: one with a number,
name or quoted term that no cited passage holds is replaced by the extractive answer, and
`auto` judges a call without a deadline against the default one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from services.inference.answer import modes
from services.inference.answer.modes import GeneratorLoad
from services.inference.answer.result import Answer
from shared.rpc.streamrag.v1 import inference_pb2 as pb
from tests.unit.inference.fakes import FakeSearch, hit
from tests.unit.inference.serving import serving, stub

CHUNKS = {0: [hit("c-ttl", 0.9, "Tamarin keeps cached pages for 35 days before eviction.",
                  doc_id="tamarin")],
          1: [hit("c-timeout", 0.8, "The Osprey gateway times out a request after 20 seconds.",
                  doc_id="osprey")]}


class ScriptedGenerator:
    """Stands in for the generative answerer: writes `text` over every passage."""

    def __init__(self, text: str, estimate_s: float = 0.5) -> None:
        self.text, self.estimate_s, self.lm = text, estimate_s, None

    rechecks = 0  # times auto quoted on the estimate and asked for it to be measured

    def recheck(self) -> None:
        self.rechecks += 1

    def load(self, params: Any) -> GeneratorLoad:
        return GeneratorLoad(overloaded=False, estimate_s=self.estimate_s)

    async def stream(self, params: Any, texts: Sequence[str]) -> AsyncIterator[str | Answer]:
        yield self.text
        yield Answer((self.text,), "stop", 10, 5, 1.0, mode=modes.GENERATIVE, unit="tokens",
                     shown=tuple(range(1, len(texts) + 1)))

    async def stop(self) -> None:
        pass


def ask(text: str, question: str = "how long does Tamarin keep cached pages?",
        estimate_s: float = 0.5, **settings: Any) -> pb.QueryResponse:
    async def go() -> pb.QueryResponse:
        async with serving(FakeSearch(CHUNKS), **settings) as (runtime, channel):
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
