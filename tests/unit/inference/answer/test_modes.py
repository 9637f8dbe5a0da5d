"""Which answer path a query takes: what was asked, then auto's load and deadline rules."""

from __future__ import annotations

import pytest

from services.inference.answer.modes import GeneratorLoad, ModeChoice, choose
from services.inference.errors import NoGeneratorError

IDLE = GeneratorLoad(overloaded=False, estimate_s=2.0)


@pytest.mark.parametrize(("requested", "default", "load", "left", "expected"), [
    ("", "extractive", IDLE, None, ModeChoice("extractive", "default")),
    ("extractive", "auto", IDLE, None, ModeChoice("extractive", "requested")),
    ("generative", "extractive", IDLE, 0.1, ModeChoice("generative", "requested")),
    ("", "auto", IDLE, None, ModeChoice("generative", "fits")),
    ("auto", "extractive", IDLE, 2.5, ModeChoice("generative", "fits")),
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
