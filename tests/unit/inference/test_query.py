"""Query argument validation: defaults, limits, and the field each refusal names."""

from __future__ import annotations

from typing import Any

import pytest

from services.inference.query import parse_params
from services.inference.settings import InferenceSettings
from shared.errors import InvalidInput

NOW = 1_700_000_000.0
SETTINGS = InferenceSettings(max_question_chars=100, max_top_k=20, default_top_k=5)


def parse(**kw: Any) -> Any:
    return parse_params(SETTINGS, **{"question": "why?", "now": NOW, **kw})


def test_defaults_and_normalisation() -> None:
    p = parse(question="  what broke?  ", domain=" support ", source="")
    assert (p.question, p.top_k, p.domain, p.source) == ("what broke?", 5, "support", None)
    assert (p.since, p.until, p.stop, p.max_new_tokens) == (None, None, (), 0)
    assert parse(top_k=20, since="1h").top_k == 20
    assert parse(since="1h").since == NOW - 3600
    assert [parse(answer_mode=m).answer_mode for m in ("", " Generative ", "auto")] == [
        "", "generative", "auto"]


@pytest.mark.parametrize(("kw", "field", "reason"), [
    ({"question": ""}, "question", "empty_question"),
    ({"question": " \n\t"}, "question", "empty_question"),
    ({"question": "x" * 101}, "question", "question_too_long"),
    ({"top_k": -1}, "top_k", "top_k_out_of_range"),
    ({"top_k": 21}, "top_k", "top_k_out_of_range"),
    ({"since": "soon"}, "since", "bad_time"),
    ({"until": "2024-01-01T00:00:00"}, "until", "naive_time"),
    ({"since": "1h", "until": "2h"}, "until", "until_before_since"),
    ({"domain": "d" * 300}, "domain", "filter_too_long"),
    ({"max_new_tokens": -3}, "max_new_tokens", "negative"),
    ({"temperature": 2.5}, "temperature", "temperature_out_of_range"),
    ({"temperature": float("nan")}, "temperature", "temperature_out_of_range"),
    ({"stop": ("a", "b", "c", "d", "e")}, "stop", "too_many_stop_sequences"),
    ({"stop": ("",)}, "stop", "bad_stop_sequence"),
    ({"answer_mode": "creative"}, "answer_mode", "unknown_answer_mode"),
])
def test_refusals_name_the_field(kw: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse(**kw)
    assert (err.value.field, err.value.reason) == (field, reason)
