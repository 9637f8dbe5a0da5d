"""Which answer path a query takes: what was asked, then auto's load and deadline rules."""

from __future__ import annotations

import pytest

from services.inference.answer.modes import GeneratorLoad, ModeChoice, choose
from services.inference.errors import GenerationBusyError, NoGeneratorError

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
