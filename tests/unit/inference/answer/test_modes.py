"""Which answer path a query takes: what was asked, then auto's load and deadline rules,
and the deadline each mode is judged by when the call sets none."""

from __future__ import annotations

import pytest

from services.inference.answer.modes import (
    GeneratorLoad,
    ModeChoice,
    QualityWindow,
    choose,
    time_to_judge,
)
from services.inference.engine import QueryEngine
from services.inference.errors import GenerationBusyError, NoGeneratorError
from services.inference.query import QueryParams
from services.inference.settings import InferenceSettings
from tests.unit.inference.fakes import FakeSearch

IDLE = GeneratorLoad(overloaded=False, estimate_s=2.0)


@pytest.mark.parametrize(("requested", "default", "load", "left", "expected"), [
    ("", "extractive", IDLE, None, ModeChoice("extractive", "default")),
    ("extractive", "auto", IDLE, None, ModeChoice("extractive", "requested")),
    ("generative", "extractive", IDLE, 0.1, ModeChoice("generative", "requested")),
    ("", "auto", IDLE, None, ModeChoice("generative", "fits")),
    ("auto", "extractive", IDLE, 2.5, ModeChoice("generative", "fits", 2.5)),
    ("auto", "extractive", IDLE, 1.5, ModeChoice("extractive", "deadline")),
    ("", "auto", GeneratorLoad(True, 2.0), None, ModeChoice("extractive", "overload")),
    ("", "auto", None, None, ModeChoice("extractive", "no_generator")),
    ("", "generative", None, None, None),
    ("generative", "auto", None, None, None),
])
def test_the_path_follows_request_default_load_and_deadline(
        requested: str, default: str, load: GeneratorLoad | None, left: float | None,
        expected: ModeChoice | None) -> None:
    if expected is None:
        with pytest.raises(NoGeneratorError) as raised:
            choose(requested, default, load, left)
        assert raised.value.field == "answer_mode" and raised.value.reason == "no_generator"
    else:
        assert choose(requested, default, load, left) == expected


@pytest.mark.parametrize(("waiting", "left", "admitted"), [
    (0, 5.0, True),  # nothing queued: it starts now, the call's deadline bounds it
    (3, 5.0, False),  # queued work keeps it past the deadline: refused at once
    (3, 20.0, True),  # the estimate fits what is left
    (3, None, True),  # no deadline to judge by
])
def test_generation_asked_by_name_is_admitted_only_when_the_queue_ahead_fits_its_deadline(
        waiting: int, left: float | None, admitted: bool) -> None:
    load = GeneratorLoad(overloaded=False, estimate_s=9.0, waiting=waiting)
    if admitted:
        assert choose("generative", "auto", load, left) == ModeChoice("generative", "requested")
    else:
        with pytest.raises(GenerationBusyError, match="3 generations queued.*9.0s.*5.0s left"):
            choose("generative", "auto", load, left)


def test_auto_hands_its_generation_the_time_it_judged_by() -> None:
    assert choose("", "auto", IDLE, 7.5).budget_s == 7.5
    assert choose("generative", "auto", IDLE, 7.5).budget_s is None  # the caller's own


AUTO_S, DEFAULT_S = 30.0, 120.0


@pytest.mark.parametrize(("wanted", "left", "elapsed", "default", "judged"), [
    # A call's own deadline is what every mode judges by.
    ("auto", 7.5, 3.0, DEFAULT_S, 7.5),
    ("generative", 7.5, 3.0, DEFAULT_S, 7.5),
    ("extractive", 7.5, 3.0, DEFAULT_S, 7.5),
    # A call that set none: the server's default less its time so far ...
    ("generative", None, 0.0, DEFAULT_S, 120.0),
    ("generative", None, 4.5, DEFAULT_S, 115.5),
    ("extractive", None, 4.5, DEFAULT_S, 115.5),
    ("generative", None, 130.0, DEFAULT_S, 0.0),
    ("generative", None, 4.5, None, None),  # no default deadline: nothing to judge by
    # ... and auto, for its choice, at most its own shorter auto deadline.
    ("auto", None, 0.0, DEFAULT_S, 30.0),
    ("auto", None, 4.5, DEFAULT_S, 30.0),
    ("auto", None, 100.0, DEFAULT_S, 20.0),  # never past the deadline the call will get
    ("auto", None, 4.5, None, 30.0),
])
def test_a_call_is_judged_by_its_own_deadline_else_the_servers_default(
        wanted: str, left: float | None, elapsed: float, default: float | None,
        judged: float | None) -> None:
    assert time_to_judge(wanted, left, elapsed, AUTO_S, default) == judged


class Loaded:
    """A generator whose answer would take `estimate_s`, behind `waiting` queued jobs."""

    lm = None

    def __init__(self, estimate_s: float, waiting: int) -> None:
        self.estimate_s, self.waiting = estimate_s, waiting

    rechecks = 0  # times auto quoted on the estimate and asked for it to be measured

    def recheck(self) -> None:
        self.rechecks += 1

    def load(self, params: object) -> GeneratorLoad:
        return GeneratorLoad(overloaded=False, estimate_s=self.estimate_s, waiting=self.waiting)


def _params(mode: str) -> QueryParams:
    return QueryParams("q", 5, None, None, None, None, 0, 0.0, (), answer_mode=mode)


def _engine(estimate_s: float, waiting: int = 1) -> QueryEngine:
    # Defaults (30 s auto, 120 s) but no latency objective: these judge the deadlines.
    engine = QueryEngine(InferenceSettings(auto_latency_objective_ms=0), FakeSearch({}))
    engine.generative = Loaded(estimate_s, waiting)  # type: ignore[assignment]
    return engine


def test_generation_asked_by_name_without_a_deadline_is_judged_by_the_default_120s() -> None:
    """The issue: a second concurrent generation, 95.2 s ahead of it, was refused against
    auto's 30 s although the call would have had 120 s."""
    params = _params("generative")
    assert _engine(95.2).choose_mode(params, None) == ModeChoice("generative", "requested")
    # What it is judged by is exactly the default less the call's time so far.
    with pytest.raises(GenerationBusyError, match=r"about 119\.0s, the call has 110\.0s left"):
        _engine(119.0).choose_mode(params, None, elapsed_s=10.0)
    with pytest.raises(GenerationBusyError, match=r"about 95\.2s, the call has 40\.0s left"):
        _engine(95.2).choose_mode(params, 40.0, elapsed_s=10.0)  # its own deadline wins


def test_auto_without_a_deadline_keeps_its_own_30s_and_with_one_the_callers() -> None:
    auto = _params("auto")
    assert _engine(2.0, 0).choose_mode(auto, None, elapsed_s=10.0).budget_s == 30.0
    assert _engine(2.0, 0).choose_mode(auto, 7.5, elapsed_s=10.0).budget_s == 7.5
    engine = _engine(95.2, 0)
    assert engine.choose_mode(auto, None) == ModeChoice("extractive", "deadline")
    assert engine.generative.rechecks == 1  # type: ignore[attr-defined]  # measure it again


@pytest.mark.parametrize(("estimate", "objective", "expected"), [
    (2.0, 1.0, ModeChoice("extractive", "latency_objective")),
    (0.8, 1.0, ModeChoice("generative", "fits")),
    (2.0, None, ModeChoice("generative", "fits")),  # no objective (a GPU's default)
])
def test_auto_quotes_when_generation_would_outlast_its_latency_objective(
        estimate: float, objective: float | None, expected: ModeChoice) -> None:
    load = GeneratorLoad(overloaded=False, estimate_s=estimate)
    assert choose("", "auto", load, None, objective) == expected
    # Asked for by name, generation is never held to auto's objective.
    assert choose("generative", "auto", load, None, objective).mode == "generative"


def test_auto_quotes_while_most_recent_generated_answers_were_replaced() -> None:
    assert choose("", "auto", IDLE, None, None, quality_ok=False) == \
        ModeChoice("extractive", "quality")
    assert choose("generative", "auto", IDLE, None, None, quality_ok=False).mode == \
        "generative"
    window = QualityWindow(window_s=600, floor=0.5, min_answers=5)
    for t in range(4):
        window.record(t, kept=False)
    assert window.kept_share(4) is None and window.ok(4)  # too few to judge
    window.record(4, kept=True)
    assert window.kept_share(5) == 0.2 and not window.ok(5)
    for t in range(5, 10):
        window.record(t, kept=True)
    assert window.kept_share(10) == 0.6 and window.ok(10)
    assert window.ok(700)  # the verdicts aged out: auto tries generating again


def test_the_default_objective_is_a_second_on_a_cpu_and_none_on_a_gpu() -> None:
    import torch

    class Lm:
        def __init__(self, device: str) -> None:
            self.device = torch.device(device)

    class Gen:
        def __init__(self, device: str) -> None:
            self.lm = Lm(device)

    engine = QueryEngine(InferenceSettings(), FakeSearch({}))
    engine.generative = Gen("cpu")  # type: ignore[assignment]
    assert engine.auto_objective_s == 1.0
    engine.generative = Gen("cuda")  # type: ignore[assignment]
    assert engine.auto_objective_s is None
    assert QueryEngine(InferenceSettings(auto_latency_objective_ms=2500),
                       FakeSearch({})).auto_objective_s == 2.5
    assert QueryEngine(InferenceSettings(auto_latency_objective_ms=0),
                       FakeSearch({})).auto_objective_s is None
