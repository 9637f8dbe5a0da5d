"""Long runs of punctuation reach spaCy broken up: its tokenizer peels such a run one
suffix at a time, each search scanning the rest (16 KiB of "!" took 33 s and starved the
worker's heartbeats into an eviction). Broken with spaces, at the same length, so every
finding keeps its span; the personal data around a run is still found and masked."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.redaction.redactor import Redactor, break_runs
from services.redaction.settings import RedactionSettings


@given(st.text(alphabet=st.sampled_from("ab 1!?-=._@\n"), max_size=300))
def test_only_long_punctuation_runs_change_and_the_length_never_does(text: str) -> None:
    out = break_runs(text)
    assert len(out) == len(text)
    long_runs = [m.span() for m in re.finditer(r"[^\w\s]{32,}", text)]
    for k, (a, b) in enumerate(zip(text, out, strict=True)):
        inside = any(s <= k < e for s, e in long_runs)
        assert a == b or (inside and b == " "), (k, a, b)
    assert not re.search(r"[^\w\s]{2,}", "".join(out[s:e] for s, e in long_runs))


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


@pytest.mark.parametrize("run", ["!" * 6000, "!?" * 3000, "-=" * 3000 + "." * 100])
def test_personal_data_between_long_runs_is_masked_and_the_runs_kept(
        redactor: Redactor, run: str) -> None:
    text = f"{run} mail jane.doe@example.com or call +1 415-555-0132 {run}"
    [out] = redactor.redact_texts([text])
    assert out.text == (f"{run} mail <EMAIL_ADDRESS> or call <PHONE_NUMBER> {run}")
