"""auto's estimate of a generation's time: the warm-up's figures, taken under start-up
load, give way to the first real measurement, and auto quoting on the estimate has the pace
measured again, so a fresh mesh's slow first estimate does not keep auto quoting for good."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.inference.answer.generative.answerer import PROBE_TOKENS
from services.inference.answer.generative.decode import Finished, Job
from services.inference.answer.generative.pace import RECHECK_S, WEIGHT, Pace
from services.inference.answer.modes import ModeChoice
from services.inference.engine import QueryEngine
from services.inference.query import QueryParams
from services.inference.settings import InferenceSettings
from tests.unit.inference.fakes import FakeSearch


def test_the_first_measurement_replaces_the_warm_ups_figures_later_ones_are_averaged() -> None:
    pace = Pace(first_token_s=5.0, per_token_s=1.4)  # 94.6 s for 64 tokens, at start-up
    assert pace.estimate(64) == pytest.approx(94.6)
    pace.observe(0.3, 0.06)
    assert (pace.first_token_s, pace.per_token_s, pace.measured) == (0.3, 0.06, True)
    assert pace.estimate(64) == pytest.approx(4.14)
    pace.observe(0.5, 0.16)
    assert pace.per_token_s == pytest.approx(0.06 + WEIGHT * 0.1)
    assert pace.first_token_s == pytest.approx(0.3 + WEIGHT * 0.2)


def test_a_measurement_is_asked_for_at_most_once_per_recheck_interval() -> None:
    pace = Pace(5.0, 1.4)
    assert pace.due(100.0)
    assert not pace.due(100.0 + RECHECK_S - 0.1)
    assert pace.due(100.0 + RECHECK_S)


class FakeLM:
    """What the answerer asks of a model, with the warm-up's (slow) figures."""

    warm_first_token_s, warm_per_token_s = 5.0, 1.4

    def render(self, instruction: str, user: str) -> str:
        return f"{instruction}\n{user}"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def prompt_room(self, max_new: int) -> int:
        return 2048 - max_new


class FakeRunner:
    """Decodes every job's max_new_tokens at `per_token_s` each."""

    admit, max_rows = None, 8

    def __init__(self, per_token_s: float) -> None:
        self.per_token_s, self.jobs = per_token_s, list[Job]()

    def on_step(self, rows: int) -> None:
        pass

    async def __call__(self, jobs: Sequence[Job]) -> list[None]:
        for job in jobs:
            self.jobs.append(job)
            for k in range(job.max_new_tokens):
                await asyncio.sleep(self.per_token_s)
                job.events.put_nowait(f" w{k}")
            job.events.put_nowait(Finished("length", 5, job.max_new_tokens))
        return [None] * len(jobs)


def test_auto_quoting_on_a_start_up_estimate_has_it_measured_and_then_generates() -> None:
    params = QueryParams("q", 5, None, None, None, None, 0, 0.0, (), answer_mode="auto")

    async def go() -> tuple[ModeChoice, ModeChoice, ModeChoice, Pace, list[Job]]:
        engine = QueryEngine(InferenceSettings(), FakeSearch({}))
        runner = FakeRunner(0.002)
        engine.attach_generator(FakeLM(), runner)  # type: ignore[arg-type]
        generative = engine.generative
        assert generative is not None
        try:
            first = engine.choose_mode(params, None)  # 94.6 s against auto's 30 s
            probe = generative._probe
            assert probe is not None
            again = engine.choose_mode(params, None)  # while it measures: no second one
            await probe
            return first, again, engine.choose_mode(params, None), generative.pace, runner.jobs
        finally:
            await generative.stop()

    first, again, after, pace, jobs = asyncio.run(go())
    assert first == ModeChoice("extractive", "deadline") and again == first
    assert [job.max_new_tokens for job in jobs] == [PROBE_TOKENS]  # one measurement
    assert pace.measured and pace.per_token_s < 0.1
    assert after == ModeChoice("generative", "fits", 30.0)
