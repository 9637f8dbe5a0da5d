"""Reranker settings: a bad folder or value fails when the settings are built, naming it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.inference.settings import InferenceSettings
from shared.settings import named
from tests.unit.inference.rerank.fakes import model_folder

VARIABLE = "STREAMRAG_INFERENCE_RERANKER_PATH"


def test_off_by_default() -> None:
    s = InferenceSettings()
    assert s.reranker_path is None and s.rerank.candidates == 20


def test_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = model_folder(tmp_path)
    monkeypatch.setenv(VARIABLE, str(path))
    monkeypatch.setenv("STREAMRAG_INFERENCE_RERANK_CANDIDATES", "30")
    s = InferenceSettings()
    assert (s.reranker_path, s.rerank.candidates) == (path, 30)


@pytest.mark.parametrize(("make", "why"), [
    (lambda p: p / "missing", "not a directory"),
    (lambda p: model_folder(p, weights=False), "no weights"),
    (lambda p: model_folder(p, tokenizer=False), "no tokenizer"),
    (lambda p: model_folder(p, config="{not json"), "config.json is not readable JSON"),
    (lambda p: model_folder(p, config=[1]), "not a JSON object"),
    (lambda p: model_folder(p, config={}), "has 2 labels"),  # transformers' default
    (lambda p: model_folder(p, config={"id2label": {"0": "no", "1": "yes", "2": "maybe"}}),
     "has 3 labels"),
    (lambda p: model_folder(p, config={"num_labels": 2}), "has 2 labels"),
])
def test_a_bad_folder_fails_naming_the_variable(tmp_path: Path, make: Callable[[Path], Path],
                                                why: str) -> None:
    path = make(tmp_path)
    with pytest.raises(ValidationError) as err:
        InferenceSettings(reranker_path=path)
    assert f"{VARIABLE}={path}" in str(err.value) and why in str(err.value)


def test_a_folder_without_config_fails(tmp_path: Path) -> None:
    path = model_folder(tmp_path)
    (path / "config.json").unlink()
    with pytest.raises(ValidationError, match="no config.json"):
        InferenceSettings(reranker_path=path)


@pytest.mark.parametrize("field", ["rerank_candidates", "rerank_max_batch",
                                   "rerank_token_budget", "rerank_max_length"])
def test_non_positive_limits_are_refused(field: str) -> None:
    with pytest.raises(ValidationError) as failed:
        InferenceSettings(**{field: 0})
    assert str(named(failed.value)).startswith(f"STREAMRAG_INFERENCE_{field.upper()}: ")


def test_more_candidates_than_a_shard_search_may_ask_are_refused() -> None:
    with pytest.raises(ValidationError) as failed:
        InferenceSettings(rerank_candidates=1001)
    assert str(named(failed.value)).startswith("STREAMRAG_INFERENCE_RERANK_CANDIDATES: ")
